//go:build mpi

package mpi

import (
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
)

// IAllReduce starts AllReduce and returns at once. A goroutine of this Comm
// runs the queued requests (IAllReduce and IReduceScatter) one after
// another, in the order they were issued, each a blocking MPI call under
// the MPI mutex, so that MPI makes progress while the caller computes;
// every synchronous collective first waits for the queue to drain, so the
// PEs see their collectives in the same order. In steady state (requests
// waited for and recycled) it does not allocate.
func (c *Comm) IAllReduce(b comm.Buffer, off, n int, op comm.Op) (comm.Request, error) {
	mb, err := c.reduceArgs("iallreduce", b, off, n, op, c.me)
	if err != nil {
		return nil, err
	}
	return c.async.Submit(asyncArgs{mb.call(desync.AllReduce, off, n, op, 0), mb, off, n, off, off + n, op}), nil
}

// IReduceScatter starts the reduce-scatter of the part [lo, hi) of elements
// [off, off+n) of the Float32 buffer b and returns at once: queued as
// IAllReduce is, and run as ReduceScatter is with this PE's piece of the
// part (comm.PartShard) for its shard. Flat MPI adds in its own order, as
// in ReduceScatter.
func (c *Comm) IReduceScatter(b comm.Buffer, off, n, lo, hi int, op comm.Op) (comm.Request, error) {
	const name = "ireducescatter"
	mb, err := c.reduceArgs(name, b, off, n, op, c.me)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckPart(Name, c.me, name, b, off, n, lo, hi); err != nil {
		return nil, err
	}
	call := mb.call(desync.ReduceScatterPart, lo, hi-lo, op, 0)
	call.Sharding = desync.ShardingOf(off, n)
	return c.async.Submit(asyncArgs{call, mb, off, n, lo, hi, op}), nil
}

// asyncArgs are the arguments of a queued IAllReduce or IReduceScatter: its
// fingerprint, the range [off, off+n) and the reduce-scatter's part [lo, hi).
type asyncArgs struct {
	call           desync.Call
	b              *buffer
	off, n, lo, hi int
	op             comm.Op
}

// startAsync starts the goroutine that serves IAllReduce and IReduceScatter.
func (c *Comm) startAsync() {
	c.async.Start("mpi: async collective", func(a asyncArgs) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if a.call.Op == desync.ReduceScatterPart {
			const name = "ireducescatter"
			if err := c.usableLocked(name); err != nil {
				return err
			}
			return c.reduceScatterLocked(name, a.call, a.b, a.off, a.n, a.lo, a.hi, a.op)
		}
		if err := c.usableLocked("iallreduce"); err != nil {
			return err
		}
		return c.allReduceLocked("iallreduce", a.call, a.b, a.off, a.n, a.op)
	})
}
