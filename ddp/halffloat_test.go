package ddp

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Known bit patterns of bfloat16 and binary16 widen to their values, and
// the writer's rounding is to nearest, ties to even.
func TestHalfFloats(t *testing.T) {
	for _, c := range []struct {
		bits uint16
		want float32
	}{
		{0x3f80, 1}, {0xc040, -3}, {0x3eab, 0.333984375}, {0x4049, 3.140625},
		{0x0001, math.Float32frombits(0x00010000)}, {0x7f80, float32(math.Inf(1))}, {0x8000, float32(math.Copysign(0, -1))},
	} {
		assert.Equal(t, math.Float32bits(c.want), math.Float32bits(bf16ToF32(c.bits)), "bf16 %#04x", c.bits)
	}
	for _, c := range []struct {
		bits uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x3555, 0.333251953125}, {0x0001, 5.9604644775390625e-08},
		{0x03ff, 6.097555160522461e-05}, {0x8400, -6.103515625e-05}, {0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))},
	} {
		assert.Equal(t, c.want, f16ToF32(c.bits), "f16 %#04x", c.bits)
		assert.Equal(t, c.bits, f16FromF32(c.want), "f16 of %g", c.want)
	}
	assert.True(t, math.IsNaN(float64(f16ToF32(0x7e00))))
	assert.True(t, math.IsNaN(float64(bf16ToF32(bf16FromF32(float32(math.NaN()))))))
	// ties to even: 1+2⁻⁸ lies halfway between bf16 1 and 1+2⁻⁷
	assert.Equal(t, uint16(0x3f80), bf16FromF32(math.Float32frombits(0x3f808000)))
	assert.Equal(t, uint16(0x3f82), bf16FromF32(math.Float32frombits(0x3f818000)))
	assert.Equal(t, uint16(0x3f81), bf16FromF32(math.Float32frombits(0x3f808001)))
	// binary16: 1+2⁻¹¹ is halfway between 1 and 1+2⁻¹⁰; 65520 overflows
	assert.Equal(t, uint16(0x3c00), f16FromF32(1+1.0/2048))
	assert.Equal(t, uint16(0x3c02), f16FromF32(1+3.0/2048))
	assert.Equal(t, uint16(0x7c00), f16FromF32(65520))
	assert.Equal(t, uint16(0x0000), f16FromF32(1e-9))
	// every binary16 survives widening and rounding back
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue // NaN
		}
		require.Equal(t, uint16(h), f16FromF32(f16ToF32(uint16(h))), "%#04x", h)
	}
}

// A file of BF16 and F16 tensors written by hand decodes to the known
// values; another dtype is an error naming the tensor.
func TestSafetensorsReadsHalfFloats(t *testing.T) {
	le16 := func(v ...uint16) []byte {
		b := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
		return b
	}
	var buf bytes.Buffer
	require.NoError(t, writeSafetensors(&buf, nil, []stTensor{
		{Name: "b", Shape: []int{2, 2}, DType: "BF16", Raw: le16(0x3f80, 0xc040, 0x3eab, 0x4049)},
		{Name: "w", Shape: []int{2}, DType: "BF16", Data: []float32{1.5, -0.25}}, // encoded, then raw bytes again
		{Name: "h", Shape: []int{3}, DType: "F16", Raw: le16(0x3c00, 0x3555, 0x8400)},
		{Name: "i", Shape: []int{1}, DType: "I64", Raw: make([]byte, 8)},
	}))
	f, err := parseSafetensors(buf.Bytes())
	require.NoError(t, err)
	got := make([]float32, 4)
	require.NoError(t, f.floats("b", got))
	assert.Equal(t, []float32{1, -3, 0.333984375, 3.140625}, got)
	got = got[:3]
	require.NoError(t, f.floats("h", got))
	assert.Equal(t, []float32{1, 0.333251953125, -6.103515625e-05}, got)
	got = got[:2]
	require.NoError(t, f.floats("w", got))
	assert.Equal(t, []float32{1.5, -0.25}, got)
	assert.EqualError(t, f.floats("i", got[:1]), `tensor "i" is I64, want F32, BF16 or F16`)
	assert.EqualError(t, f.floats("b", got[:1]), `tensor "b" has 4 values, want 1`)
	assert.EqualError(t, f.floats("nope", got), `tensor "nope" is missing`)
}
