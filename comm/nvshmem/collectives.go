package nvshmem

import (
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/internal/cudalib"
)

// Barrier waits until every PE has called Barrier: a one-block kernel
// synchronising through flags in symmetric memory. Puts are complete when
// they return, so they are visible after it.
func (c *Comm) Barrier() error {
	if err := c.collective("barrier"); err != nil {
		return err
	}
	return c.barrier("barrier")
}

// AllReduce reduces elements [off, off+n) of the Float32 or BFloat16 buffer
// b across PEs in place; every PE ends with identical bits. One-shot for
// small ranges, two-shot (reduce-scatter, all-gather) for large ones.
func (c *Comm) AllReduce(b comm.Buffer, off, n int, op comm.Op) error {
	return c.allReduce(b, off, n, op, cudalib.Auto)
}

// allReduce is AllReduce with the algorithm chosen (tests, benchmarks).
func (c *Comm) allReduce(b comm.Buffer, off, n int, op comm.Op, algo cudalib.Algo) error {
	const name = "allreduce"
	if err := c.enqueueAllReduce(name, b, off, n, op, algo); err != nil {
		return err
	}
	return c.waitStream(name)
}

// enqueueAllReduce checks an allreduce's arguments and enqueues it on the
// stream (AllReduce, IAllReduce, AllReduceEnqueue).
func (c *Comm) enqueueAllReduce(name string, b comm.Buffer, off, n int, op comm.Op, algo cudalib.Algo) error {
	sb, dt, cop, err := c.reduceArgs(name, b, off, n, op, c.me)
	if err != nil {
		return err
	}
	if err := c.collective(name); err != nil {
		return err
	}
	if err := c.lib.AllReduceEnqueue(sb.sym, off, n, dt, cop, algo); err != nil {
		return c.fail(c.libErr(name, err))
	}
	return nil
}

// IAllReduce enqueues AllReduce on the stream and returns at once; the
// request's Wait waits for an event recorded after it. Collectives issued
// later run after it (one stream).
func (c *Comm) IAllReduce(b comm.Buffer, off, n int, op comm.Op) (comm.Request, error) {
	const name = "iallreduce"
	if err := c.enqueueAllReduce(name, b, off, n, op, cudalib.Auto); err != nil {
		return nil, err
	}
	ev, err := c.lib.EventRecord()
	if err != nil {
		return nil, c.fail(c.libErr(name, err))
	}
	r := &request{c: c, ev: ev}
	c.pending = append(c.pending, r)
	return r, nil
}

// AllReduceEnqueue enqueues AllReduce on Stream() and returns at once, with
// no event and no host wait, so that it can be captured in a CUDA graph with
// the compute around it. Errors of the kernel surface at the next
// synchronising call.
func (c *Comm) AllReduceEnqueue(b comm.Buffer, off, n int, op comm.Op) error {
	return c.enqueueAllReduce("allreduce", b, off, n, op, cudalib.Auto)
}

// Reduce reduces [off, off+n) of b across PEs into root's copy, with the
// arithmetic of AllReduce; the other copies are unchanged.
func (c *Comm) Reduce(b comm.Buffer, off, n int, op comm.Op, root int) error {
	const name = "reduce"
	sb, dt, cop, err := c.reduceArgs(name, b, off, n, op, root)
	if err != nil {
		return err
	}
	if err := c.collective(name); err != nil {
		return err
	}
	if err := c.lib.ReduceEnqueue(sb.sym, off, n, dt, cop, root); err != nil {
		return c.fail(c.libErr(name, err))
	}
	return c.waitStream(name)
}

// Broadcast copies root's elements [off, off+n) of b (any kind) into every
// PE's copy.
func (c *Comm) Broadcast(b comm.Buffer, off, n int, root int) error {
	const name = "broadcast"
	sb, err := c.access(name, b, off, n, root)
	if err != nil {
		return err
	}
	if err := c.collective(name); err != nil {
		return err
	}
	es := sb.kind.Size()
	if err := c.lib.BroadcastEnqueue(sb.sym, off*es, n*es, root); err != nil {
		return c.fail(c.libErr(name, err))
	}
	return c.waitStream(name)
}

// reduceArgs checks the arguments of a reduction (root is any valid PE for
// the allreduces) and translates kind and operator.
func (c *Comm) reduceArgs(name string, b comm.Buffer, off, n int, op comm.Op, root int) (*buffer, cudalib.DType, cudalib.Op, error) {
	sb, err := c.access(name, b, off, n, root, comm.Float32, comm.BFloat16)
	if err != nil {
		return nil, 0, 0, err
	}
	if err := backend.CheckOp(Name, c.me, name, op); err != nil {
		return nil, 0, 0, err
	}
	dt := cudalib.Float32
	if sb.kind == comm.BFloat16 {
		dt = cudalib.BFloat16
	}
	return sb, dt, cudalib.Op(op), nil
}

// request is an IAllReduce in flight. It implements comm.Request.
type request struct {
	c    *Comm
	ev   cudalib.Event
	done bool
	err  error
}

// Wait blocks until the allreduce is complete on this PE (with the deadline)
// and returns its error; later calls return the same.
func (r *request) Wait() error {
	if r.done {
		return r.err
	}
	c := r.c
	r.err = c.poll("iallreduce", func() (bool, error) { return c.lib.EventQuery(r.ev) }, true)
	_ = c.lib.EventDestroy(r.ev)
	r.done = true
	for i, p := range c.pending {
		if p == r {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			break
		}
	}
	return r.err
}
