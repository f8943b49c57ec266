//go:build mpi

package mpi

import (
	"runtime"
	"time"
	"unsafe"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
)

// One-sided operations to a peer are MPI_Put and MPI_Get in the buffer's
// window; to this PE itself they are plain copies. A put returns once its
// source may be reused (MPI_Win_flush_local); it is complete at the peer
// after Quiet, Fence or Barrier. A get returns with the data.

// PutFloat32 copies src into PE pe's copy of dst at element off.
func (c *Comm) PutFloat32(dst comm.Buffer, off int, src []float32, pe int) error {
	return c.put("put", dst, comm.Float32, off, unsafe.Pointer(unsafe.SliceData(src)), len(src), pe)
}

// GetFloat32 copies len(dst) elements of PE pe's copy of src, from off.
func (c *Comm) GetFloat32(dst []float32, src comm.Buffer, off int, pe int) error {
	return c.get("get", src, comm.Float32, off, unsafe.Pointer(unsafe.SliceData(dst)), len(dst), pe)
}

// PutBytes copies src into PE pe's copy of the Byte buffer dst at off.
func (c *Comm) PutBytes(dst comm.Buffer, off int, src []byte, pe int) error {
	return c.put("put_bytes", dst, comm.Byte, off, unsafe.Pointer(unsafe.SliceData(src)), len(src), pe)
}

// GetBytes copies len(dst) bytes of PE pe's copy of the Byte buffer src, from off.
func (c *Comm) GetBytes(dst []byte, src comm.Buffer, off int, pe int) error {
	return c.get("get_bytes", src, comm.Byte, off, unsafe.Pointer(unsafe.SliceData(dst)), len(dst), pe)
}

// P stores v into PE pe's copy of dst at off.
func (c *Comm) P(dst comm.Buffer, off int, v float32, pe int) error {
	return c.put("p", dst, comm.Float32, off, unsafe.Pointer(&v), 1, pe)
}

// G loads one float32 from PE pe's copy of src at off.
func (c *Comm) G(src comm.Buffer, off int, pe int) (float32, error) {
	var v float32
	err := c.get("g", src, comm.Float32, off, unsafe.Pointer(&v), 1, pe)
	return v, err
}

// put copies n elements at src into PE pe's copy of dst at off.
func (c *Comm) put(op string, dst comm.Buffer, kind comm.Kind, off int, src unsafe.Pointer, n, pe int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := c.access(op, dst, kind, off, n, pe)
	if err != nil {
		return err
	}
	if err := c.usableLocked(op); err != nil {
		return err
	}
	return c.putLocked(op, b, off, src, n, pe)
}

func (c *Comm) putLocked(op string, b *buffer, off int, src unsafe.Pointer, n, pe int) error {
	bytes := n * b.kind.Size()
	if bytes == 0 {
		return nil
	}
	if pe == c.me {
		copy(unsafe.Slice((*byte)(b.at(off)), bytes), unsafe.Slice((*byte)(src), bytes))
		return nil
	}
	disp := int64(off) * int64(b.kind.Size())
	if err := c.call(op, pe, func() error { return cPut(src, int64(bytes), pe, disp, b.w) }); err != nil {
		return err
	}
	c.dirty[b] = true
	return nil
}

// get copies n elements of PE pe's copy of src at off into dst.
func (c *Comm) get(op string, src comm.Buffer, kind comm.Kind, off int, dst unsafe.Pointer, n, pe int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := c.access(op, src, kind, off, n, pe)
	if err != nil {
		return err
	}
	if err := c.usableLocked(op); err != nil {
		return err
	}
	bytes := n * b.kind.Size()
	if bytes == 0 {
		return nil
	}
	if pe == c.me {
		copy(unsafe.Slice((*byte)(dst), bytes), unsafe.Slice((*byte)(b.at(off)), bytes))
		return nil
	}
	disp := int64(off) * int64(b.kind.Size())
	return c.call(op, pe, func() error { return cGet(dst, int64(bytes), pe, disp, b.w) })
}

// PutSignal copies src into PE pe's copy of dst at off, waits until the data
// is complete at pe (MPI_Win_flush), then updates signal word sigIdx of the
// Uint64 buffer sig on pe atomically (MPI_Accumulate with MPI_REPLACE or
// MPI_SUM) and waits until that is complete too.
func (c *Comm) PutSignal(dst comm.Buffer, off int, src []float32, sig comm.Buffer, sigIdx int, value uint64, op comm.SignalOp, pe int) error {
	const name = "put_signal"
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := c.access(name, dst, comm.Float32, off, len(src), pe)
	if err != nil {
		return err
	}
	s, err := c.access(name, sig, comm.Uint64, sigIdx, 1, pe)
	if err != nil {
		return err
	}
	if err := backend.CheckSignalOp(Name, c.me, name, op); err != nil {
		return err
	}
	if err := c.usableLocked(name); err != nil {
		return err
	}
	if err := c.putLocked(name, b, off, unsafe.Pointer(unsafe.SliceData(src)), len(src), pe); err != nil {
		return err
	}
	return c.call(name, pe, func() error {
		if len(src) > 0 && pe != c.me {
			if err := cFlush(pe, b.w); err != nil {
				return err
			}
		}
		return cSignal(value, op == comm.SignalAdd, pe, int64(sigIdx)*8, s.w)
	})
}

// WaitUntil blocks until this PE's signal word sigIdx of sig satisfies cmp
// against value. It reads the word atomically with respect to peers'
// signals (MPI_Fetch_and_op with MPI_NO_OP), which also lets MPI make
// progress; between reads it gives the CPU away, then sleeps for up to a
// millisecond. At the deadline it returns a *comm.TimeoutError.
func (c *Comm) WaitUntil(sig comm.Buffer, sigIdx int, cmp comm.Cmp, value uint64) error {
	const name = "wait_until"
	c.mu.Lock()
	s, err := c.access(name, sig, comm.Uint64, sigIdx, 1, c.me)
	if err == nil {
		err = backend.CheckCmp(Name, c.me, name, cmp)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	start := time.Now()
	sleep := time.Duration(0)
	for polls := 0; ; polls++ {
		c.mu.Lock()
		err := c.usableLocked(name)
		var v uint64
		if err == nil {
			if v, err = cReadU64(c.me, int64(sigIdx)*8, s.w); err != nil {
				err = c.fail(name, err)
			}
		}
		c.mu.Unlock()
		switch {
		case err != nil:
			return err
		case cmp.Holds(v, value):
			return nil
		case time.Since(start) >= c.timeout:
			return &comm.TimeoutError{PE: c.me, Op: name, Deadline: c.timeout}
		case polls < 100:
			runtime.Gosched()
		default:
			sleep = min(max(2*sleep, 10*time.Microsecond), time.Millisecond)
			time.Sleep(sleep)
		}
	}
}

// Fence orders this PE's puts: MPI does not order puts, so it completes
// them (MPI_Win_flush_all), as Quiet.
func (c *Comm) Fence() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked("fence"); err != nil {
		return err
	}
	return c.quietLocked("fence")
}

// Quiet waits until all of this PE's puts are complete at their targets.
func (c *Comm) Quiet() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked("quiet"); err != nil {
		return err
	}
	return c.quietLocked("quiet")
}

// quietLocked flushes every window with puts outstanding. The caller holds mu.
func (c *Comm) quietLocked(op string) error {
	for b := range c.dirty {
		if err := c.call(op, waitAny, func() error { return cFlushAll(b.w) }); err != nil {
			return err
		}
		delete(c.dirty, b)
	}
	return nil
}
