package cuda

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/symddp/symddp/compute"
)

// staging is a ring of pinned host buffers for SetTensor, SetLabels and
// ReadTensor. SetTensor copies the caller's values into the next buffer and
// enqueues an asynchronous copy from it on the stream, followed by an event;
// a buffer is reused only after the host has waited for the event of its
// previous copy, so the caller's slice is free when SetTensor returns and
// the stream is never waited for. A buffer grows (pinned memory is
// reallocated) only when a larger transfer comes along, so a training loop
// allocates nothing after its first step.
type staging struct {
	bufs [stagingDepth]stagingBuf
	next int
}

// stagingDepth is how many host-to-device copies may be in flight.
const stagingDepth = 4

type stagingBuf struct {
	host    unsafe.Pointer // pinned
	bytes   int
	ev      uint64 // recorded after the buffer's last copy
	pending bool   // ev was recorded and not yet waited for
}

// stageTake returns the next staging buffer with room for bytes, its
// previous copy complete.
func (e *Engine) stageTake(bytes int) (*stagingBuf, error) {
	s := &e.stage
	b := &s.bufs[s.next]
	s.next = (s.next + 1) % stagingDepth
	if b.ev == 0 {
		ev, err := e.dev.EventCreate()
		if err != nil {
			return nil, err
		}
		b.ev = ev
	}
	if b.pending {
		if err := e.dev.EventSync(b.ev, e.timeout); err != nil {
			return nil, err
		}
		b.pending = false
	}
	if b.bytes < bytes {
		size := max(bytes, 64<<10, min(stagingChunk, 4*b.bytes)) // grow geometrically
		if b.host != nil {
			if err := e.dev.HostFree(b.host); err != nil {
				return nil, err
			}
			b.host, b.bytes = nil, 0
		}
		h, err := e.dev.HostAlloc(size)
		if err != nil {
			return nil, err
		}
		b.host, b.bytes = h, size
	}
	return b, nil
}

func (s *staging) free(d device) error {
	var errs []error
	for i := range s.bufs {
		b := &s.bufs[i]
		if b.host != nil {
			errs = append(errs, d.HostFree(b.host))
		}
		if b.ev != 0 {
			errs = append(errs, d.EventDestroy(b.ev))
		}
		*b = stagingBuf{}
	}
	return errors.Join(errs...)
}

// stagingChunk is the largest piece a transfer moves through one staging
// buffer; larger transfers go in pieces through the ring.
const stagingChunk = 8 << 20

// copyIn enqueues the copy of bytes at src (Go memory) to dst through the
// staging buffers, chunk by chunk.
func (e *Engine) copyIn(op string, dst uintptr, src unsafe.Pointer, bytes int) {
	for off := 0; off < bytes; off += stagingChunk {
		n := min(stagingChunk, bytes-off)
		b, err := e.stageTake(n)
		if err == nil {
			copy(unsafe.Slice((*byte)(b.host), n), unsafe.Slice((*byte)(unsafe.Add(src, off)), n))
			err = e.dev.HtoD(false, dst+uintptr(off), b.host, n)
		}
		if err == nil {
			err = e.dev.EventRecord(false, b.ev)
			b.pending = err == nil
		}
		if err != nil {
			e.fail(op, err)
			return
		}
	}
}

// SetTensor copies src into t (len(src) == t.Size()) through pinned
// staging; it returns before the copy is done, and src may be reused at
// once.
func (e *Engine) SetTensor(t compute.Tensor, src []float32) {
	d := e.tensorOf("SetTensor", t)
	if len(src) != d.size {
		panic(fmt.Sprintf("cuda: SetTensor: %d values for a tensor of shape %v", len(src), []int(d.shape)))
	}
	if e.capture.active {
		e.capture.fail("SetTensor")
		return
	}
	e.copyIn("SetTensor", d.ptr, unsafe.Pointer(unsafe.SliceData(src)), 4*len(src))
}

// SetLabels copies src into l (len(src) == l.Len()) like SetTensor and
// keeps a host copy for the label checks of SoftmaxCrossEntropy.
func (e *Engine) SetLabels(l compute.Labels, src []int32) {
	d := e.labelsOf("SetLabels", l)
	if len(src) != len(d.host) {
		panic(fmt.Sprintf("cuda: SetLabels: %d labels for room of %d", len(src), len(d.host)))
	}
	if e.capture.active {
		e.capture.fail("SetLabels")
		return
	}
	copy(d.host, src)
	e.copyIn("SetLabels", d.ptr, unsafe.Pointer(unsafe.SliceData(d.host)), 4*len(src))
}

// ReadTensor copies t into dst (len(dst) == t.Size()), a bf16 tensor's
// values widened to float32 exactly; it waits for the device. A failure of
// the device panics (see Engine).
func (e *Engine) ReadTensor(dst []float32, t compute.Tensor) {
	d := e.anyTensor("ReadTensor", t)
	if len(dst) != d.size {
		panic(fmt.Sprintf("cuda: ReadTensor: room for %d values from a tensor of shape %v", len(dst), []int(d.shape)))
	}
	if e.capture.active {
		e.capture.fail("ReadTensor")
		return
	}
	if err := e.readOut(unsafe.Pointer(unsafe.SliceData(dst)), d.ptr, d.bytes()); err != nil {
		panicDevice("ReadTensor", err)
	}
	if d.dtype == compute.BF16 {
		// the bf16 values fill dst's first half: widen them from the last,
		// whose float32 lies past every value not yet read
		h := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst))
		for i := len(dst) - 1; i >= 0; i-- {
			dst[i] = math.Float32frombits(uint32(h[i]) << 16)
		}
	}
}

// readOut copies bytes at device address src into Go memory dst through the
// staging buffers, chunk by chunk, waiting for the stream.
func (e *Engine) readOut(dst unsafe.Pointer, src uintptr, bytes int) error {
	if e.err != nil {
		return e.err
	}
	for off := 0; off < bytes; off += stagingChunk {
		n := min(stagingChunk, bytes-off)
		b, err := e.stageTake(n)
		if err == nil {
			err = e.dev.DtoH(false, b.host, src+uintptr(off), n)
		}
		if err == nil {
			err = e.dev.Sync(e.timeout)
		}
		if err != nil {
			e.fail("ReadTensor", err)
			return e.err
		}
		copy(unsafe.Slice((*byte)(unsafe.Add(dst, off)), n), unsafe.Slice((*byte)(b.host), n))
	}
	return nil
}

// Zero sets every element of t (fp32 or bf16) to 0 (a memset on the
// stream).
func (e *Engine) Zero(t compute.Tensor) {
	d := e.anyTensor("Zero", t)
	e.fail("Zero", e.dev.Zero(d.ptr, d.bytes()))
}

// Copy copies src into dst (same size and element type), device to device
// on the stream.
func (e *Engine) Copy(dst, src compute.Tensor) {
	d, s := e.anyTensor("Copy", dst), e.anyTensor("Copy", src)
	if d.size != s.size || d.dtype != s.dtype {
		compute.PanicShapes("cuda", "Copy", "dst and src must have the same size", d.shape, s.shape)
	}
	e.fail("Copy", e.dev.Copy(d.ptr, s.ptr, d.bytes()))
}
