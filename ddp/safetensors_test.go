package ddp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A safetensors file cut short is one error that says so, the same every
// time it is read (the header's tensors used to be checked in Go's map
// order, so each read named another tensor), with the length the file
// should have.
func TestParseSafetensorsTruncated(t *testing.T) {
	var tensors []stTensor
	for i := range 12 {
		tensors = append(tensors, stTensor{Name: fmt.Sprintf("t%02d", i), Shape: []int{4}, Data: make([]float32, 4)})
	}
	var buf bytes.Buffer
	require.NoError(t, writeSafetensors(&buf, nil, tensors))
	b := buf.Bytes()
	_, err := parseSafetensors(b)
	require.NoError(t, err)
	hl := int(binary.LittleEndian.Uint64(b))
	cut := b[:8+hl+100] // 100 of the 192 data bytes
	want := fmt.Sprintf("checkpoint file is corrupt: the header's tensors need 192 bytes of data and the file holds 100: it is %d bytes long, want %d (truncated?)", len(cut), len(b))
	for range 20 {
		_, err := parseSafetensors(cut)
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Equal(t, want, err.Error())
	}
}
