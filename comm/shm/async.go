package shm

import (
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/comm/internal/orderq"
)

// IAllReduce starts AllReduce and returns at once. A goroutine of this Comm
// runs the queued requests (IAllReduce and IReduceScatter) one after
// another, in the order they were issued; every synchronous collective
// first waits for the queue to drain, so the PEs see their collectives in
// the same order. In steady state (requests waited for and recycled) it
// does not allocate.
func (c *Comm) IAllReduce(b comm.Buffer, off, n int, op comm.Op) (comm.Request, error) {
	sb, err := c.reduceArgs("iallreduce", b, off, n, op, c.me)
	if err != nil {
		return nil, err
	}
	lo, hi := comm.Shard(off, n, c.npes, c.me)
	return c.async.Submit(asyncArgs{sb.call(desync.AllReduce, off, n, op, 0), sb, lo, hi, op, -1}), nil
}

// IReduceScatter starts the reduce-scatter of the part [lo, hi) of elements
// [off, off+n) of the Float32 buffer b and returns at once: queued as
// IAllReduce is, and run as ReduceScatter is, with this PE's piece of the
// part (comm.PartShard) for its slice, so that every element is the same
// fold in PE order as ReduceScatter's.
func (c *Comm) IReduceScatter(b comm.Buffer, off, n, lo, hi int, op comm.Op) (comm.Request, error) {
	const name = "ireducescatter"
	sb, err := c.reduceArgs(name, b, off, n, op, c.me)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckPart(Name, c.me, name, b, off, n, lo, hi); err != nil {
		return nil, err
	}
	call := sb.call(desync.ReduceScatterPart, lo, hi-lo, op, 0)
	call.Sharding = desync.ShardingOf(off, n)
	plo, phi := comm.PartShard(off, n, c.npes, c.me, lo, hi)
	return c.async.Submit(asyncArgs{call, sb, plo, phi, op, c.me}), nil
}

// asyncArgs are the arguments of a queued IAllReduce or IReduceScatter:
// its fingerprint, this PE's slice [lo, hi) and where the result goes (a
// PE's copy, -1 for every copy), as reduce takes them.
type asyncArgs struct {
	call   desync.Call
	b      *buffer
	lo, hi int
	op     comm.Op
	dst    int
}

// startAsync starts the goroutine that serves IAllReduce and IReduceScatter.
func (c *Comm) startAsync() {
	c.async.Start("shm: async collective", func(a asyncArgs) error {
		name := "iallreduce"
		if a.call.Op == desync.ReduceScatterPart {
			name = "ireducescatter"
		}
		if err := c.healthy(name); err != nil {
			return err
		}
		return c.reduce(name, a.call, a.b, a.lo, a.hi, a.op, a.dst)
	})
}

var _ comm.Request = (*orderq.Request[asyncArgs])(nil)
