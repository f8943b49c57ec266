package ddp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
)

// The safetensors layout: an 8-byte little-endian header length N, N bytes
// of JSON (padded with spaces to a multiple of 8), then the raw tensor data.
// The JSON maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the start of the data) and holds
// string metadata under "__metadata__". Other tools (the safetensors
// library, PyTorch, JAX) read the weights directly.

// ErrCorrupt is wrapped by every error about a malformed, truncated or
// tampered checkpoint file.
var ErrCorrupt = errors.New("checkpoint file is corrupt")

// ErrNotCheckpoint is the error of a well-formed safetensors file that
// symddp did not write as a checkpoint (no symddp metadata), such as a
// Hugging Face model or this program's export of one.
var ErrNotCheckpoint = errors.New("not a symddp checkpoint: a safetensors file without symddp's metadata " +
	"(a Hugging Face model? train --init-from takes its directory)")

// maxHeader bounds the JSON header so that a corrupt length cannot make the
// reader allocate gigabytes.
const maxHeader = 64 << 20

// stTensor is one tensor to write: Data encoded as DType (F32 when empty,
// BF16 or F16, rounded to nearest even), or Raw, bytes written as they are
// under DType (any dtype).
type stTensor struct {
	Name  string
	Shape []int
	Data  []float32
	DType string
	Raw   []byte
}

// dtype is the dtype t is written as.
func (t stTensor) dtype() string {
	if t.DType == "" {
		return "F32"
	}
	return t.DType
}

// bytes is the size of t's data in the file.
func (t stTensor) bytes() int64 {
	if t.Raw != nil {
		return int64(len(t.Raw))
	}
	return int64(dtypeSize(t.dtype())) * int64(len(t.Data))
}

// stEntry is one tensor of a parsed file.
type stEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// stFile is a parsed safetensors file.
type stFile struct {
	Meta    map[string]string
	Entries map[string]stEntry
	Data    []byte // the data section
	// src and start, where Data is nil, are where the data section is
	// read from: src from byte start (a checkpoint file opened by
	// openCheckpoint, read tensor by tensor)
	src   io.ReaderAt
	start int64
}

// tensorBytes is the data of entry e: a slice of Data, or read from src.
func (f *stFile) tensorBytes(name string, e stEntry) ([]byte, error) {
	if f.src == nil {
		return f.Data[e.DataOffsets[0]:e.DataOffsets[1]], nil
	}
	b := make([]byte, e.DataOffsets[1]-e.DataOffsets[0])
	if _, err := f.src.ReadAt(b, f.start+e.DataOffsets[0]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("tensor %q: the file ends before its data (%w): changed since it was verified?", name, err)
		}
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	return b, nil
}

// writeSafetensors writes tensors (in the given order) and meta to w.
func writeSafetensors(w io.Writer, meta map[string]string, tensors []stTensor) error {
	header := map[string]any{}
	if len(meta) > 0 {
		header["__metadata__"] = meta
	}
	var off int64
	for _, t := range tensors {
		if t.Name == "__metadata__" || t.Name == "" {
			return fmt.Errorf("safetensors: bad tensor name %q", t.Name)
		}
		if _, dup := header[t.Name]; dup {
			return fmt.Errorf("safetensors: tensor %q twice", t.Name)
		}
		dt := t.dtype()
		if t.Raw == nil && dt != "F32" && dt != "BF16" && dt != "F16" {
			return fmt.Errorf("safetensors: tensor %q: cannot encode float32 values as %s", t.Name, dt)
		}
		if n, size := shapeSize(t.Shape), dtypeSize(dt); size == 0 || int64(n)*int64(size) != t.bytes() {
			return fmt.Errorf("safetensors: tensor %q: shape %v of %s does not fit its %d bytes", t.Name, t.Shape, dt, t.bytes())
		}
		end := off + t.bytes()
		header[t.Name] = stEntry{DType: dt, Shape: t.Shape, DataOffsets: []int64{off, end}}
		off = end
	}
	js, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: header: %w", err)
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte(" "), pad)...)
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	buf := make([]byte, 0, 1<<16)
	for _, t := range tensors {
		if t.Raw != nil {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
			if _, err := w.Write(t.Raw); err != nil {
				return err
			}
			continue
		}
		for _, v := range t.Data {
			switch t.dtype() {
			case "BF16":
				buf = binary.LittleEndian.AppendUint16(buf, bf16FromF32(v))
			case "F16":
				buf = binary.LittleEndian.AppendUint16(buf, f16FromF32(v))
			default:
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
			if len(buf) >= cap(buf)-4 {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
	}
	_, err = w.Write(buf)
	return err
}

// parseSafetensors parses and validates a whole file: header length within
// the file, JSON well formed, every tensor's dtype known, its shape
// matching its byte range, ranges inside the data, not overlapping, and
// covering the data section exactly. The tensors are checked in the order
// of their names, so that a file gives the same error every time; a file
// cut short says how many bytes its header's tensors need.
func parseSafetensors(b []byte) (*stFile, error) {
	f, start, err := parseSafetensorsHeader(b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	f.Data = b[start:]
	return f, nil
}

// parseSafetensorsHeader is parseSafetensors for a file of size bytes of
// which head holds the start: the 8-byte length and, when that length fits
// the file, the whole header. It returns the file without Data and where
// the data section starts, with parseSafetensors' checks and errors.
func parseSafetensorsHeader(head []byte, size int64) (*stFile, int64, error) {
	if size < 8 {
		return nil, 0, fmt.Errorf("%w: %d bytes, shorter than the 8-byte header length", ErrCorrupt, size)
	}
	hl := binary.LittleEndian.Uint64(head[:8])
	if hl > maxHeader || hl > uint64(size-8) {
		return nil, 0, fmt.Errorf("%w: header length %d does not fit a %d-byte file (truncated?)", ErrCorrupt, hl, size)
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(head[8 : 8+hl]))
	if err := dec.Decode(&raw); err != nil {
		return nil, 0, fmt.Errorf("%w: header is not JSON: %v", ErrCorrupt, err)
	}
	start := 8 + int64(hl)
	dataLen := size - start
	f := &stFile{Entries: map[string]stEntry{}}
	type span struct {
		name       string
		begin, end int64
	}
	var spans []span
	var need int64 // the data bytes the header's tensors reach
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		msg := raw[name]
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Meta); err != nil {
				return nil, 0, fmt.Errorf("%w: __metadata__ is not a map of strings: %v", ErrCorrupt, err)
			}
			continue
		}
		var e stEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, 0, fmt.Errorf("%w: tensor %q: %v", ErrCorrupt, name, err)
		}
		size := dtypeSize(e.DType)
		if size == 0 {
			return nil, 0, fmt.Errorf("%w: tensor %q: unknown dtype %q", ErrCorrupt, name, e.DType)
		}
		if len(e.DataOffsets) != 2 || e.DataOffsets[0] < 0 || e.DataOffsets[1] < e.DataOffsets[0] {
			return nil, 0, fmt.Errorf("%w: tensor %q: data offsets %v", ErrCorrupt, name, e.DataOffsets)
		}
		if end := e.DataOffsets[1]; end > dataLen {
			need = max(need, end)
			continue
		}
		for _, d := range e.Shape {
			if d < 0 {
				return nil, 0, fmt.Errorf("%w: tensor %q: shape %v", ErrCorrupt, name, e.Shape)
			}
		}
		n := shapeSize(e.Shape)
		if n < 0 || int64(n)*int64(size) != e.DataOffsets[1]-e.DataOffsets[0] {
			return nil, 0, fmt.Errorf("%w: tensor %q: shape %v of %s does not fill bytes %v", ErrCorrupt, name, e.Shape, e.DType, e.DataOffsets)
		}
		f.Entries[name] = e
		spans = append(spans, span{name, e.DataOffsets[0], e.DataOffsets[1]})
	}
	if need > 0 {
		return nil, 0, fmt.Errorf("%w: the header's tensors need %d bytes of data and the file holds %d: it is %d bytes long, want %d (truncated?)",
			ErrCorrupt, need, dataLen, size, start+need)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].begin < spans[j].begin })
	var at int64
	for _, s := range spans {
		if s.begin != at {
			return nil, 0, fmt.Errorf("%w: tensor %q starts at byte %d of the data, want %d (gap or overlap)", ErrCorrupt, s.name, s.begin, at)
		}
		at = s.end
	}
	if at != dataLen {
		return nil, 0, fmt.Errorf("%w: tensors cover %d of the %d data bytes", ErrCorrupt, at, dataLen)
	}
	return f, start, nil
}

// checkFloat32s checks that tensor name is F32 with n values, as float32s
// into a slice of n would, without reading it.
func (f *stFile) checkFloat32s(name string, n int) error {
	e, ok := f.Entries[name]
	if !ok {
		return fmt.Errorf("tensor %q is missing", name)
	}
	if e.DType != "F32" {
		return fmt.Errorf("tensor %q is %s, want F32", name, e.DType)
	}
	if have := (e.DataOffsets[1] - e.DataOffsets[0]) / 4; have != int64(n) {
		return fmt.Errorf("tensor %q has %d values, want %d", name, have, n)
	}
	return nil
}

// float32s decodes tensor name (F32) into dst, which must have its size.
func (f *stFile) float32s(name string, dst []float32) error {
	if err := f.checkFloat32s(name, len(dst)); err != nil {
		return err
	}
	e := f.Entries[name]
	src, err := f.tensorBytes(name, e)
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
	return nil
}

// floats decodes tensor name, F32, BF16 or F16, into dst, which must have
// its size; errors name the tensor.
func (f *stFile) floats(name string, dst []float32) error {
	e, ok := f.Entries[name]
	if !ok {
		return fmt.Errorf("tensor %q is missing", name)
	}
	size := dtypeSize(e.DType)
	if e.DType != "F32" && e.DType != "BF16" && e.DType != "F16" {
		return fmt.Errorf("tensor %q is %s, want F32, BF16 or F16", name, e.DType)
	}
	if n := e.DataOffsets[1] - e.DataOffsets[0]; n != int64(size*len(dst)) {
		return fmt.Errorf("tensor %q has %d values, want %d", name, n/int64(size), len(dst))
	}
	src, err := f.tensorBytes(name, e)
	if err != nil {
		return err
	}
	switch e.DType {
	case "F32":
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case "BF16":
		for i := range dst {
			dst[i] = bf16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case "F16":
		for i := range dst {
			dst[i] = f16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	return nil
}

func dtypeSize(dt string) int {
	switch dt {
	case "F64", "I64", "U64":
		return 8
	case "F32", "I32", "U32":
		return 4
	case "F16", "BF16", "I16", "U16":
		return 2
	case "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2":
		return 1
	}
	return 0
}

// shapeSize is the product of shape, or -1 on overflow.
func shapeSize(shape []int) int {
	n := 1
	for _, d := range shape {
		if d != 0 && n > math.MaxInt32/d {
			return -1
		}
		n *= d
	}
	return n
}
