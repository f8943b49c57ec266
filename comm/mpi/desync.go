//go:build mpi

package mpi

import (
	"fmt"

	"github.com/symddp/symddp/comm/internal/desync"
)

// checkCall numbers collective call and, with the desync check on, gathers
// every PE's fingerprint of it (MPI_Allgather of desync.Words words) and
// compares them. Every PE gets the same words, so every PE reaches the same
// verdict; a mismatch makes the runtime unusable with the error that names
// the PEs and their calls. It is one small extra collective per collective.
// The caller holds mu.
func (c *Comm) checkCall(op string, call desync.Call) error {
	if !c.check {
		return nil
	}
	c.calls++
	call.Seq = c.calls
	if len(c.callBuf) != desync.Words*(c.npes+1) {
		c.callBuf = make([]uint64, desync.Words*(c.npes+1))
	}
	all, send := c.callBuf[:desync.Words*c.npes], c.callBuf[desync.Words*c.npes:]
	mine := call.Encode()
	copy(send, mine[:])
	if err := c.call(op, waitAll, func() error { return cAllgatherU64(send, all) }); err != nil {
		return err
	}
	for q := 0; q < c.npes; q++ {
		if [desync.Words]uint64(all[q*desync.Words:]) != mine {
			return c.desyncError(op, all)
		}
	}
	return nil
}

// desyncError describes the mismatch among the gathered fingerprints all
// and records it as the reason the runtime is unusable.
func (c *Comm) desyncError(op string, all []uint64) error {
	calls := make([]desync.Call, c.npes)
	for q := range calls {
		calls[q] = desync.Decode([desync.Words]uint64(all[q*desync.Words:]))
	}
	err := desync.Check(fmt.Sprintf("mpi: PE %d: %s", c.me, op), calls)
	if c.broken == nil {
		c.broken = err
	}
	return err
}
