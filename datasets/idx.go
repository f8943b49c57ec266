package datasets

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrBadIDX is wrapped by every error that reports malformed or unexpected
// IDX content: bad magic, wrong dimensions, truncation, trailing bytes,
// count mismatches, labels out of range, empty arrays.
var ErrBadIDX = errors.New("bad IDX data")

// IDX is one array of an IDX file, the format of MNIST and Fashion-MNIST:
// unsigned bytes in row-major order and their dimensions.
type IDX struct {
	// Dims are the dimensions, outermost first ([60000 28 28] for the
	// MNIST training images).
	Dims []int
	// Data holds product(Dims) bytes in row-major order.
	Data []byte
}

const (
	idxTypeUbyte = 0x08 // the element type code of unsigned bytes
	// maxIDXBytes bounds the payload of one array; the largest file of
	// MNIST holds 47 MB.
	maxIDXBytes = 1 << 32
	// idxFirstChunk is the first allocation for the payload. The buffer
	// then doubles as data arrives, so a header that lies about its size
	// costs no more memory than the bytes that are really there.
	idxFirstChunk = 1 << 20
)

// ReadIDX reads one IDX array of unsigned bytes from r, raw or gzip-compressed
// (recognised by its magic bytes, whatever the file is called). It checks the
// magic number, reads exactly the number of bytes the dimensions declare and
// requires the input to end there; for gzip it also checks the CRC. Every
// content error wraps ErrBadIDX; truncation also wraps io.ErrUnexpectedEOF.
func ReadIDX(r io.Reader) (*IDX, error) {
	src, err := idxStream(r)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	dims, size, err := readIDXHeader(src)
	if err != nil {
		return nil, err
	}
	data, err := readIDXPayload(src, size)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, errIDXTruncated(size, dims, len(data), err)
	case err != nil:
		return nil, errIDXRead(len(data), size, err)
	}
	if err := expectIDXEnd(src, size, dims); err != nil {
		return nil, err
	}
	return &IDX{Dims: dims, Data: data}, nil
}

// isGzip reports whether b starts with the gzip magic bytes.
func isGzip(b []byte) bool {
	return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b
}

// idxStream returns the IDX bytes of r: r itself (buffered) when it is raw,
// its decompression when it starts with the gzip magic bytes. Closing the
// result does not close r.
func idxStream(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if head, _ := br.Peek(2); !isGzip(head) {
		return io.NopCloser(br), nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%w: gzip header: %w", ErrBadIDX, err)
	}
	return zr, nil
}

// expectIDXEnd checks that src ends right after the size bytes the header
// declared. For gzip this read also checks the CRC.
func expectIDXEnd(src io.Reader, size int, dims []int) error {
	var one [1]byte
	switch n, err := io.ReadFull(src, one[:]); {
	case n > 0:
		return errIDXTrailing(size, dims)
	case err != io.EOF:
		return fmt.Errorf("%w: after the data: %w", ErrBadIDX, err)
	}
	return nil
}

// errIDXTruncated reports input that ended, with err, after have of the size
// bytes of data the header declared.
func errIDXTruncated(size int, dims []int, have int, err error) error {
	return fmt.Errorf("%w: truncated data: header declares %d bytes (%s), input holds %d: %w",
		ErrBadIDX, size, dimsString(dims), have, err)
}

// errIDXTrailing reports input that goes on after the size bytes of data the
// header declared.
func errIDXTrailing(size int, dims []int) error {
	return fmt.Errorf("%w: trailing data after the %d bytes declared by the header (%s)",
		ErrBadIDX, size, dimsString(dims))
}

// errIDXRead reports a read error at byte got of the size bytes of data.
func errIDXRead(got, size int, err error) error {
	return fmt.Errorf("%w: data byte %d of %d: %w", ErrBadIDX, got, size, err)
}

// checkDims checks that a has ndims dimensions; what names the array
// ("images") in the error.
func checkDims(a *IDX, ndims int, what string) error {
	if len(a.Dims) != ndims {
		return fmt.Errorf("%w: %s need %d dimensions, the header declares %d (%s)",
			ErrBadIDX, what, ndims, len(a.Dims), dimsString(a.Dims))
	}
	return nil
}

// readIDXHeader reads the magic number and the dimensions, and returns the
// dimensions and the payload size in bytes.
func readIDXHeader(src io.Reader) (dims []int, size int, err error) {
	var magic [4]byte
	if n, err := io.ReadFull(src, magic[:]); err != nil {
		return nil, 0, fmt.Errorf("%w: truncated header: %d of 4 magic bytes: %w", ErrBadIDX, n, asTruncation(err))
	}
	m := binary.BigEndian.Uint32(magic[:])
	switch {
	case magic[0] != 0 || magic[1] != 0:
		return nil, 0, fmt.Errorf("%w: bad magic %#08x: an IDX file starts with two zero bytes", ErrBadIDX, m)
	case magic[2] != idxTypeUbyte:
		return nil, 0, fmt.Errorf("%w: magic %#08x declares element type %#02x; only %#02x (unsigned byte) is supported",
			ErrBadIDX, m, magic[2], idxTypeUbyte)
	case magic[3] == 0:
		return nil, 0, fmt.Errorf("%w: magic %#08x declares 0 dimensions", ErrBadIDX, m)
	}
	raw := make([]byte, 4*int(magic[3]))
	if n, err := io.ReadFull(src, raw); err != nil {
		return nil, 0, fmt.Errorf("%w: truncated header: %d of %d bytes of dimension sizes: %w",
			ErrBadIDX, n, len(raw), asTruncation(err))
	}
	dims = make([]int, magic[3])
	size = 1
	for i := range dims {
		d := int(binary.BigEndian.Uint32(raw[4*i:]))
		dims[i] = d
		if d != 0 && size > maxIDXBytes/d {
			return nil, 0, fmt.Errorf("%w: dimensions %s exceed %d bytes", ErrBadIDX, dimsString(dims[:i+1]), maxIDXBytes)
		}
		size *= d
	}
	return dims, size, nil
}

// readIDXPayload reads exactly size bytes into one slice. On error it
// returns the bytes it did read.
func readIDXPayload(src io.Reader, size int) ([]byte, error) {
	buf := make([]byte, min(size, idxFirstChunk))
	got := 0
	for {
		n, err := io.ReadFull(src, buf[got:])
		got += n
		if err != nil {
			return buf[:got], asTruncation(err)
		}
		if got == size {
			return buf, nil
		}
		grown := make([]byte, min(size, 2*len(buf)))
		copy(grown, buf)
		buf = grown
	}
}

// asTruncation reports an input that ended early as io.ErrUnexpectedEOF,
// whether it ended before or inside the field being read.
func asTruncation(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// dimsString writes dimensions as 60000x28x28.
func dimsString(dims []int) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, "x")
}
