package datasets

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// encodeIDX writes an IDX array of unsigned bytes: magic 0x0000_08nd, the
// dimensions big-endian, then data.
func encodeIDX(dims []int, data []byte) []byte {
	out := []byte{0, 0, idxTypeUbyte, byte(len(dims))}
	for _, d := range dims {
		out = binary.BigEndian.AppendUint32(out, uint32(d))
	}
	return append(out, data...)
}

func gzipBytes(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ramp returns n bytes 0, 1, 2, ... (mod 256).
func ramp(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestReadIDXValid(t *testing.T) {
	images := encodeIDX([]int{3, 2, 4}, ramp(24))
	labels := encodeIDX([]int{3}, []byte{7, 0, 9})
	cases := []struct {
		name  string
		input []byte
		dims  []int
		data  []byte
	}{
		{"images raw", images, []int{3, 2, 4}, ramp(24)},
		{"images gzip", gzipBytes(t, images), []int{3, 2, 4}, ramp(24)},
		{"labels raw", labels, []int{3}, []byte{7, 0, 9}},
		{"labels gzip", gzipBytes(t, labels), []int{3}, []byte{7, 0, 9}},
		{"empty array", encodeIDX([]int{0, 28, 28}, nil), []int{0, 28, 28}, []byte{}},
		// Larger than the first chunk: the payload buffer has to grow.
		{"growing buffer", encodeIDX([]int{3*idxFirstChunk + 5}, ramp(3*idxFirstChunk+5)),
			[]int{3*idxFirstChunk + 5}, ramp(3*idxFirstChunk + 5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := ReadIDX(bytes.NewReader(c.input))
			if err != nil {
				t.Fatalf("ReadIDX: %v", err)
			}
			if !slices.Equal(a.Dims, c.dims) || !bytes.Equal(a.Data, c.data) {
				t.Fatalf("got dims %v and %d bytes, want dims %v and %d bytes", a.Dims, len(a.Data), c.dims, len(c.data))
			}
		})
	}
}

func TestReadIDXErrors(t *testing.T) {
	images := encodeIDX([]int{3, 2, 4}, ramp(24))
	zipped := gzipBytes(t, images)
	badCRC := slices.Clone(zipped)
	badCRC[len(badCRC)-8] ^= 0xff // the CRC-32 is in the last 8 bytes, before the size
	cases := []struct {
		name       string
		input      []byte
		want       string // a fragment of the message
		truncation bool   // the error also wraps io.ErrUnexpectedEOF
	}{
		{"empty input", nil, "truncated header: 0 of 4 magic bytes", true},
		{"short magic", []byte{0, 0}, "truncated header: 2 of 4 magic bytes", true},
		{"nonzero first bytes", append([]byte{0x12, 0x34}, images[2:]...), "bad magic 0x12340803", false},
		{"element type int32", append([]byte{0, 0, 0x0c}, images[3:]...), "element type 0x0c", false},
		{"zero dimensions", []byte{0, 0, 8, 0}, "declares 0 dimensions", false},
		{"truncated dimensions", images[:9], "truncated header: 5 of 12 bytes of dimension sizes", true},
		{"truncated data", images[:len(images)-1], "truncated data: header declares 24 bytes (3x2x4), input holds 23", true},
		{"no data", images[:16], "truncated data: header declares 24 bytes (3x2x4), input holds 0", true},
		{"trailing data", append(slices.Clone(images), 0), "trailing data after the 24 bytes", false},
		{"huge dimensions", encodeIDX([]int{1 << 20, 1 << 20, 1 << 20}, nil), "exceed 4294967296 bytes", false},
		{"truncated gzip", zipped[:len(zipped)/2], "unexpected EOF", true},
		{"gzip without trailer", zipped[:len(zipped)-8], "unexpected EOF", true},
		{"gzip bad checksum", badCRC, "checksum", false},
		{"gzip short header", []byte{0x1f, 0x8b, 8, 0, 0}, "gzip header: unexpected EOF", true},
		{"gzip unknown method", []byte{0x1f, 0x8b, 9, 0, 0, 0, 0, 0, 0, 3}, "gzip header: gzip: invalid header", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := ReadIDX(bytes.NewReader(c.input))
			if err == nil {
				t.Fatalf("ReadIDX returned dims %v, want an error containing %q", a.Dims, c.want)
			}
			if !errors.Is(err, ErrBadIDX) {
				t.Errorf("error %q does not wrap ErrBadIDX", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if got := errors.Is(err, io.ErrUnexpectedEOF); got != c.truncation {
				t.Errorf("error %q: wraps io.ErrUnexpectedEOF = %v, want %v", err, got, c.truncation)
			}
		})
	}
}

// FuzzReadIDX checks that ReadIDX never panics, and that what it accepts is
// consistent: len(Data) is the product of Dims and re-encoding it reads back
// the same array.
func FuzzReadIDX(f *testing.F) {
	images := encodeIDX([]int{2, 3, 3}, ramp(18))
	labels := encodeIDX([]int{4}, []byte{1, 2, 3, 9})
	for _, seed := range [][]byte{
		images, labels, gzipBytes(f, images), gzipBytes(f, labels),
		images[:10], images[:len(images)-3], append(slices.Clone(labels), 5),
		{0, 0, 8, 0}, {0, 0, 9, 1, 0, 0, 0, 1, 200}, {0x1f, 0x8b},
		encodeIDX([]int{0xffff_ffff, 0xffff_ffff}, nil),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		a, err := ReadIDX(bytes.NewReader(input))
		if err != nil {
			if !errors.Is(err, ErrBadIDX) {
				t.Fatalf("error %q does not wrap ErrBadIDX", err)
			}
			return
		}
		size := 1
		for _, d := range a.Dims {
			size *= d
		}
		if len(a.Data) != size {
			t.Fatalf("dims %v but %d bytes", a.Dims, len(a.Data))
		}
		again, err := ReadIDX(bytes.NewReader(encodeIDX(a.Dims, a.Data)))
		if err != nil {
			t.Fatalf("re-encoded array: %v", err)
		}
		if !slices.Equal(again.Dims, a.Dims) || !bytes.Equal(again.Data, a.Data) {
			t.Fatalf("re-encoded array reads back as dims %v, want %v", again.Dims, a.Dims)
		}
	})
}
