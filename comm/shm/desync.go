package shm

import (
	"fmt"

	"github.com/symddp/symddp/comm/internal/desync"
)

// enter is the entry barrier of a collective. With the desync check on, the
// PE numbers the call, publishes its fingerprint in its slot before the
// barrier and compares every peer's after it. All PEs read the same slots
// after the same barrier, so they all reach the same verdict; a slot is
// rewritten only two collectives later, after a barrier that every reader
// must have reached first. A mismatch is sticky, like a timeout: the PEs
// are no longer in step.
func (c *Comm) enter(op string, call desync.Call) error {
	if !c.check {
		return c.barrier(op)
	}
	c.calls++
	call.Seq = c.calls
	w := call.Encode()
	mine := &c.seg.slot(c.me).call[call.Seq&1]
	for i, v := range w {
		mine.w[i].Store(v)
	}
	if err := c.barrier(op); err != nil {
		return err
	}
	for q := 0; q < c.npes; q++ {
		theirs := &c.seg.slot(q).call[call.Seq&1]
		for i, v := range w {
			if theirs.w[i].Load() != v {
				return c.fail(c.desyncError(op, call.Seq))
			}
		}
	}
	return nil
}

// desyncError decodes every PE's fingerprint of collective seq and
// describes the mismatch.
func (c *Comm) desyncError(op string, seq uint64) error {
	calls := make([]desync.Call, c.npes)
	for q := range calls {
		var w [desync.Words]uint64
		for i := range w {
			w[i] = c.seg.slot(q).call[seq&1].w[i].Load()
		}
		calls[q] = desync.Decode(w)
	}
	if err := desync.Check(fmt.Sprintf("shm: PE %d: %s", c.me, op), calls); err != nil {
		return err
	}
	// The words changed between the comparison and this decoding: only a
	// peer that broke the protocol does that.
	return fmt.Errorf("shm: PE %d: %s: collective #%d: a peer rewrote its fingerprint during the check", c.me, op, seq)
}
