package shm

import (
	"time"

	"github.com/symddp/symddp/comm"
)

// Waiting: a PE that must wait spins for up to spinFor when the job has no
// more PEs than CPUs (so a peer is likely running), then gives its CPU away
// with sched_yield for up to yieldFor (so that a peer that shares the CPU can
// arrive), then sleeps on a futex in slices of at most checkEvery, checking
// between slices that the PEs it waits for are alive and that the deadline
// has not passed.
const (
	spinFor    = 30 * time.Microsecond
	yieldFor   = 100 * time.Microsecond
	checkEvery = 150 * time.Millisecond
)

// barrier blocks until every PE has entered barrier number c.epoch+1. Every
// collective is built from it. A deadline that passes returns a
// *comm.TimeoutError listing the PEs that have not arrived; a PE that has
// exited or closed its runtime while others wait for it gives an error
// wrapping comm.ErrPeerFailed. Either failure is sticky (see Comm.fail).
func (c *Comm) barrier(op string) error {
	if err := c.healthy(op); err != nil {
		return err
	}
	e := c.epoch + 1
	c.epoch = e
	h := c.seg.header()
	c.seg.slot(c.me).arrive.Store(e)
	if h.count.Add(1) == e*uint64(c.npes) {
		// Last to arrive: publish the barrier's completion.
		h.gen.Store(uint32(e))
		if h.waiters.Load() > 0 {
			futexWakeAll(&h.gen)
		}
		return nil
	}
	done := uint32(e)
	start := time.Now()
	if c.pause(start, func() bool { return h.gen.Load() == done }) {
		return nil
	}
	deadline := start.Add(c.timeout)
	nextCheck := start.Add(checkEvery)
	for {
		g := h.gen.Load()
		if g == done {
			return nil
		}
		now := time.Now()
		if !now.Before(deadline) {
			return c.fail(&comm.TimeoutError{PE: c.me, Op: op, Missing: c.missing(e), Deadline: c.timeout})
		}
		if !now.Before(nextCheck) {
			if err := c.peers.check(c, op, e); err != nil {
				return c.fail(err)
			}
			nextCheck = now.Add(checkEvery)
		}
		h.waiters.Add(1)
		futexSleep(&h.gen, g, min(nextCheck.Sub(now), deadline.Sub(now)))
		h.waiters.Add(^uint32(0))
	}
}

// missing lists the PEs that have not entered barrier e.
func (c *Comm) missing(e uint64) []int {
	var out []int
	for q := 0; q < c.npes; q++ {
		if c.seg.slot(q).arrive.Load() < e {
			out = append(out, q)
		}
	}
	return out
}

// pause waits for ready without sleeping: spinning (when the job has no more
// PEs than CPUs), then yielding the CPU. It reports whether ready held
// before the pause ran out.
func (c *Comm) pause(start time.Time, ready func() bool) bool {
	if c.spin {
		for i := 1; ; i++ {
			if ready() {
				return true
			}
			if i%256 == 0 && time.Since(start) > spinFor {
				break
			}
		}
	}
	for time.Since(start) < spinFor+yieldFor {
		schedYield()
		if ready() {
			return true
		}
	}
	return false
}
