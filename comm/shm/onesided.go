package shm

import (
	"sync/atomic"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
)

// One-sided operations copy straight into or out of the peer's copy in the
// mapping, so they are complete when they return.

// PutFloat32 copies src into PE pe's copy of dst at element off.
func (c *Comm) PutFloat32(dst comm.Buffer, off int, src []float32, pe int) error {
	b, err := c.access("put", dst, comm.Float32, off, len(src), pe)
	if err != nil {
		return err
	}
	copy(c.f32(b, pe)[off:], src)
	return nil
}

// GetFloat32 copies len(dst) elements of PE pe's copy of src, from off.
func (c *Comm) GetFloat32(dst []float32, src comm.Buffer, off int, pe int) error {
	b, err := c.access("get", src, comm.Float32, off, len(dst), pe)
	if err != nil {
		return err
	}
	copy(dst, c.f32(b, pe)[off:])
	return nil
}

// PutBytes copies src into PE pe's copy of the Byte buffer dst at off.
func (c *Comm) PutBytes(dst comm.Buffer, off int, src []byte, pe int) error {
	b, err := c.access("put_bytes", dst, comm.Byte, off, len(src), pe)
	if err != nil {
		return err
	}
	copy(c.bytes(b, pe)[off:], src)
	return nil
}

// GetBytes copies len(dst) bytes of PE pe's copy of the Byte buffer src, from off.
func (c *Comm) GetBytes(dst []byte, src comm.Buffer, off int, pe int) error {
	b, err := c.access("get_bytes", src, comm.Byte, off, len(dst), pe)
	if err != nil {
		return err
	}
	copy(dst, c.bytes(b, pe)[off:])
	return nil
}

// P stores v into PE pe's copy of dst at off.
func (c *Comm) P(dst comm.Buffer, off int, v float32, pe int) error {
	b, err := c.access("p", dst, comm.Float32, off, 1, pe)
	if err != nil {
		return err
	}
	c.f32(b, pe)[off] = v
	return nil
}

// G loads one float32 from PE pe's copy of src at off.
func (c *Comm) G(src comm.Buffer, off int, pe int) (float32, error) {
	b, err := c.access("g", src, comm.Float32, off, 1, pe)
	if err != nil {
		return 0, err
	}
	return c.f32(b, pe)[off], nil
}

// PutSignal copies src into PE pe's copy of dst at off, then updates signal
// word sigIdx of the Uint64 buffer sig on pe with an atomic store or add,
// which orders it after the data, and wakes pe if it sleeps in WaitUntil.
func (c *Comm) PutSignal(dst comm.Buffer, off int, src []float32, sig comm.Buffer, sigIdx int, value uint64, op comm.SignalOp, pe int) error {
	const name = "put_signal"
	b, err := c.access(name, dst, comm.Float32, off, len(src), pe)
	if err != nil {
		return err
	}
	w, err := c.signalWord(name, sig, sigIdx, pe)
	if err != nil {
		return err
	}
	if err := backend.CheckSignalOp(Name, c.me, name, op); err != nil {
		return err
	}
	copy(c.f32(b, pe)[off:], src)
	if op == comm.SignalSet {
		w.Store(value)
	} else {
		w.Add(value)
	}
	s := c.seg.slot(pe)
	s.sigSeq.Add(1)
	if s.sigWaiters.Load() > 0 {
		futexWakeAll(&s.sigSeq)
	}
	return nil
}

// WaitUntil blocks until this PE's signal word sigIdx of sig satisfies cmp
// against value. It gives up with a *comm.TimeoutError at the deadline, or
// with comm.ErrPeerFailed when a peer that has not closed its runtime exits.
func (c *Comm) WaitUntil(sig comm.Buffer, sigIdx int, cmp comm.Cmp, value uint64) error {
	const name = "wait_until"
	w, err := c.signalWord(name, sig, sigIdx, c.me)
	if err != nil {
		return err
	}
	if err := backend.CheckCmp(Name, c.me, name, cmp); err != nil {
		return err
	}
	if cmp.Holds(w.Load(), value) {
		return nil
	}
	start := time.Now()
	if c.pause(start, func() bool { return cmp.Holds(w.Load(), value) }) {
		return nil
	}
	s := c.seg.slot(c.me)
	s.sigWaiters.Add(1)
	defer s.sigWaiters.Add(^uint32(0))
	deadline := start.Add(c.timeout)
	nextCheck := start.Add(checkEvery)
	for {
		// Read the sequence before the word: a PutSignal after this read
		// changes the sequence, so the futex does not sleep through it.
		seq := s.sigSeq.Load()
		if cmp.Holds(w.Load(), value) {
			return nil
		}
		now := time.Now()
		if !now.Before(deadline) {
			return &comm.TimeoutError{PE: c.me, Op: name, Deadline: c.timeout}
		}
		if !now.Before(nextCheck) {
			if err := c.peers.checkAll(c, name); err != nil {
				return err
			}
			nextCheck = now.Add(checkEvery)
		}
		futexSleep(&s.sigSeq, seq, min(nextCheck.Sub(now), deadline.Sub(now)))
	}
}

// signalWord returns PE pe's signal word sigIdx of the Uint64 buffer sig.
func (c *Comm) signalWord(name string, sig comm.Buffer, sigIdx, pe int) (*atomic.Uint64, error) {
	b, err := c.access(name, sig, comm.Uint64, sigIdx, 1, pe)
	if err != nil {
		return nil, err
	}
	return (*atomic.Uint64)(c.seg.addr(pe, b.off+int64(sigIdx)*8)), nil
}

// Fence orders this PE's puts. Puts on shm are stores completed before they
// return; the atomic read-modify-write here is a full memory barrier for the
// compiler and the processor.
func (c *Comm) Fence() error {
	if err := c.usable("fence"); err != nil {
		return err
	}
	c.fence.Add(1)
	return nil
}

// Quiet waits until this PE's puts are complete and visible: they are when
// they return; like Fence it is a full memory barrier.
func (c *Comm) Quiet() error {
	if err := c.usable("quiet"); err != nil {
		return err
	}
	c.fence.Add(1)
	return nil
}
