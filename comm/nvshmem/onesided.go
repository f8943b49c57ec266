package nvshmem

import (
	"unsafe"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/internal/cudalib"
)

// One-sided operations copy between host memory and a PE's copy (straight
// to its mapped address when nvshmem_ptr reaches it, through NVSHMEM
// otherwise) and are complete when they return.

// f32Bytes views a float32 slice as its bytes.
func f32Bytes(s []float32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s))
}

// PutFloat32 copies src into PE pe's copy of dst at element off.
func (c *Comm) PutFloat32(dst comm.Buffer, off int, src []float32, pe int) error {
	b, err := c.access("put", dst, off, len(src), pe, comm.Float32)
	if err != nil {
		return err
	}
	return c.libErr("put", c.lib.Put(b.sym, 4*off, f32Bytes(src), pe))
}

// GetFloat32 copies len(dst) elements of PE pe's copy of src, from off.
func (c *Comm) GetFloat32(dst []float32, src comm.Buffer, off int, pe int) error {
	b, err := c.access("get", src, off, len(dst), pe, comm.Float32)
	if err != nil {
		return err
	}
	return c.libErr("get", c.lib.Get(f32Bytes(dst), b.sym, 4*off, pe))
}

// PutBytes copies src into PE pe's copy of the Byte buffer dst at off.
func (c *Comm) PutBytes(dst comm.Buffer, off int, src []byte, pe int) error {
	b, err := c.access("put_bytes", dst, off, len(src), pe, comm.Byte)
	if err != nil {
		return err
	}
	return c.libErr("put_bytes", c.lib.Put(b.sym, off, src, pe))
}

// GetBytes copies len(dst) bytes of PE pe's copy of the Byte buffer src, from off.
func (c *Comm) GetBytes(dst []byte, src comm.Buffer, off int, pe int) error {
	b, err := c.access("get_bytes", src, off, len(dst), pe, comm.Byte)
	if err != nil {
		return err
	}
	return c.libErr("get_bytes", c.lib.Get(dst, b.sym, off, pe))
}

// P stores v into PE pe's copy of dst at off.
func (c *Comm) P(dst comm.Buffer, off int, v float32, pe int) error {
	b, err := c.access("p", dst, off, 1, pe, comm.Float32)
	if err != nil {
		return err
	}
	return c.libErr("p", c.lib.Put(b.sym, 4*off, f32Bytes([]float32{v}), pe))
}

// G loads one float32 from PE pe's copy of src at off.
func (c *Comm) G(src comm.Buffer, off int, pe int) (float32, error) {
	b, err := c.access("g", src, off, 1, pe, comm.Float32)
	if err != nil {
		return 0, err
	}
	v := []float32{0}
	if err := c.lib.Get(f32Bytes(v), b.sym, 4*off, pe); err != nil {
		return 0, c.libErr("g", err)
	}
	return v[0], nil
}

// PutSignal copies src into PE pe's copy of dst at off, then updates signal
// word sigIdx of the Uint64 buffer sig on pe (a system-scope atomic after a
// fence, or NVSHMEM's put-with-signal), ordered after the data.
func (c *Comm) PutSignal(dst comm.Buffer, off int, src []float32, sig comm.Buffer, sigIdx int, value uint64, op comm.SignalOp, pe int) error {
	const name = "put_signal"
	b, err := c.access(name, dst, off, len(src), pe, comm.Float32)
	if err != nil {
		return err
	}
	s, err := c.access(name, sig, sigIdx, 1, pe, comm.Uint64)
	if err != nil {
		return err
	}
	if err := backend.CheckSignalOp(Name, c.me, name, op); err != nil {
		return err
	}
	sop := cudalib.SignalSet
	if op == comm.SignalAdd {
		sop = cudalib.SignalAdd
	}
	return c.libErr(name, c.lib.PutSignal(b.sym, 4*off, f32Bytes(src), s.sym, 8*sigIdx, value, sop, pe))
}

// WaitUntil blocks until this PE's signal word sigIdx of sig satisfies cmp
// against value, polling it from the host. It gives up with a
// *comm.TimeoutError at the deadline, or with comm.ErrPeerFailed when a peer
// has gone.
func (c *Comm) WaitUntil(sig comm.Buffer, sigIdx int, cmp comm.Cmp, value uint64) error {
	const name = "wait_until"
	s, err := c.access(name, sig, sigIdx, 1, c.me, comm.Uint64)
	if err != nil {
		return err
	}
	if err := backend.CheckCmp(Name, c.me, name, cmp); err != nil {
		return err
	}
	return c.poll(name, func() (bool, error) {
		v, err := c.lib.ReadU64(s.sym, 8*sigIdx)
		return err == nil && cmp.Holds(v, value), err
	}, false)
}

// Fence orders this PE's puts: they are complete when they return, so it
// only completes NVSHMEM puts to peers out of pointer reach.
func (c *Comm) Fence() error {
	if err := c.usable("fence"); err != nil {
		return err
	}
	return c.libErr("fence", c.lib.Quiet())
}

// Quiet completes this PE's puts (see Fence) and the work on the stream.
func (c *Comm) Quiet() error {
	if err := c.usable("quiet"); err != nil {
		return err
	}
	return c.libErr("quiet", c.lib.Quiet())
}
