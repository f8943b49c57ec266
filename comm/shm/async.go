package shm

import (
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/comm/internal/orderq"
)

// IAllReduce starts AllReduce and returns at once. A goroutine of this Comm
// runs the queued requests one after another, in the order they were issued;
// every synchronous collective first waits for the queue to drain, so the PEs
// see their collectives in the same order. In steady state (requests waited
// for and recycled) it does not allocate.
func (c *Comm) IAllReduce(b comm.Buffer, off, n int, op comm.Op) (comm.Request, error) {
	sb, err := c.reduceArgs("iallreduce", b, off, n, op, c.me)
	if err != nil {
		return nil, err
	}
	return c.async.Submit(asyncArgs{sb, off, n, op}), nil
}

// asyncArgs are the arguments of a queued IAllReduce.
type asyncArgs struct {
	b      *buffer
	off, n int
	op     comm.Op
}

// startAsync starts the goroutine that serves IAllReduce.
func (c *Comm) startAsync() {
	c.async.Start("shm: iallreduce", func(a asyncArgs) error {
		if err := c.healthy("iallreduce"); err != nil {
			return err
		}
		return c.reduce("iallreduce", a.b.call(desync.AllReduce, a.off, a.n, a.op, 0), a.b, a.off, a.n, a.op, -1)
	})
}

var _ comm.Request = (*orderq.Request[asyncArgs])(nil)
