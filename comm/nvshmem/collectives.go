package nvshmem

import (
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/internal/cudalib"
)

// Barrier waits until every PE has called Barrier: a one-block kernel
// synchronising through flags in symmetric memory. Puts are complete when
// they return, so they are visible after it.
func (c *Comm) Barrier() error {
	const name = "barrier"
	if err := c.collective(name); err != nil {
		return err
	}
	if err := c.joined(name); err != nil {
		return err
	}
	if err := c.enter(name, desync.Call{Op: desync.Barrier}, true); err != nil {
		return err
	}
	return c.barrier(name)
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
	if err := c.joined(name); err != nil {
		return err
	}
	if err := c.enqueueAllReduce(name, b, off, n, op, algo, true); err != nil {
		return err
	}
	return c.waitStream(name)
}

// enqueueAllReduce checks an allreduce's arguments and enqueues it on the
// stream (AllReduce, IAllReduce, AllReduceEnqueue); waits says whether the
// caller then waits for it on the host.
func (c *Comm) enqueueAllReduce(name string, b comm.Buffer, off, n int, op comm.Op, algo cudalib.Algo, waits bool) error {
	sb, dt, cop, err := c.reduceArgs(name, b, off, n, op, c.me)
	if err != nil {
		return err
	}
	if err := c.collective(name); err != nil {
		return err
	}
	if err := c.enter(name, sb.call(desync.AllReduce, off, n, op, 0), waits); err != nil {
		return err
	}
	if n == 0 {
		return c.meetEmpty(name)
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
	if err := c.joined(name); err != nil {
		return nil, err
	}
	if err := c.enqueueAllReduce(name, b, off, n, op, cudalib.Auto, false); err != nil {
		return nil, err
	}
	return c.record(name)
}

// record records an event after what is enqueued on the stream and returns
// the request of the collective name that waits for it.
func (c *Comm) record(name string) (comm.Request, error) {
	ev, err := c.lib.EventRecord()
	if err != nil {
		return nil, c.fail(c.libErr(name, err))
	}
	r := &request{c: c, name: name, ev: ev}
	c.pending = append(c.pending, r)
	return r, nil
}

// AllReduceEnqueue enqueues AllReduce on Stream() and returns at once, with
// no event and no host wait, so that it can be captured in a CUDA graph with
// the compute around it. Errors of the kernel surface at the next
// synchronising call.
func (c *Comm) AllReduceEnqueue(b comm.Buffer, off, n int, op comm.Op) error {
	return c.enqueueAllReduce("allreduce", b, off, n, op, cudalib.Auto, false)
}

// Reduce reduces [off, off+n) of b across PEs into root's copy, with the
// arithmetic of AllReduce; the other copies are unchanged.
func (c *Comm) Reduce(b comm.Buffer, off, n int, op comm.Op, root int) error {
	const name = "reduce"
	if err := c.joined(name); err != nil {
		return err
	}
	sb, dt, cop, err := c.reduceArgs(name, b, off, n, op, root)
	if err != nil {
		return err
	}
	if err := c.collective(name); err != nil {
		return err
	}
	if err := c.enter(name, sb.call(desync.Reduce, off, n, op, root), true); err != nil {
		return err
	}
	if n == 0 {
		err = c.meetEmpty(name)
	} else if err = c.lib.ReduceEnqueue(sb.sym, off, n, dt, cop, root); err != nil {
		err = c.fail(c.libErr(name, err))
	}
	if err != nil {
		return err
	}
	return c.waitStream(name)
}

// Broadcast copies root's elements [off, off+n) of b (any kind) into every
// PE's copy.
func (c *Comm) Broadcast(b comm.Buffer, off, n int, root int) error {
	const name = "broadcast"
	if err := c.joined(name); err != nil {
		return err
	}
	sb, err := c.access(name, b, off, n, root)
	if err != nil {
		return err
	}
	if err := c.collective(name); err != nil {
		return err
	}
	if err := c.enter(name, sb.call(desync.Broadcast, off, n, 0, root), true); err != nil {
		return err
	}
	es := sb.kind.Size()
	if n == 0 {
		err = c.meetEmpty(name)
	} else if err = c.lib.BroadcastEnqueue(sb.sym, off*es, n*es, root); err != nil {
		err = c.fail(c.libErr(name, err))
	}
	if err != nil {
		return err
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

// request is an IAllReduce or IReduceScatter in flight. It implements
// comm.Request.
type request struct {
	c    *Comm
	name string // "iallreduce", "ireducescatter"
	ev   cudalib.Event
	done bool
	err  error
}

// Wait blocks until the collective is complete on this PE (with the
// deadline) and returns its error; later calls return the same.
func (r *request) Wait() error {
	if r.done {
		return r.err
	}
	c := r.c
	r.err = c.poll(r.name, func() (bool, error) { return c.lib.EventQuery(r.ev) }, true)
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

var _ comm.Sharder = (*Comm)(nil)

// ReduceScatter reduces elements [off, off+n) of the Float32 or BFloat16
// buffer b across PEs into this PE's shard (comm.Shard) of its own copy,
// with AllReduce's arithmetic and bits; the rest of its copy is unchanged.
func (c *Comm) ReduceScatter(b comm.Buffer, off, n int, op comm.Op) error {
	const name = "reducescatter"
	if err := c.joined(name); err != nil {
		return err
	}
	if err := c.enqueueReduceScatter(name, b, off, n, op, true); err != nil {
		return err
	}
	return c.waitStream(name)
}

// ReduceScatterEnqueue enqueues ReduceScatter on Stream() and returns at
// once, with no event and no host wait, so that it can be captured in a
// CUDA graph (as AllReduceEnqueue).
func (c *Comm) ReduceScatterEnqueue(b comm.Buffer, off, n int, op comm.Op) error {
	return c.enqueueReduceScatter("reducescatter", b, off, n, op, false)
}

// enqueueReduceScatter checks a reduce-scatter's arguments and enqueues it:
// the kernel, or, with a peer out of pointer reach, one Reduce per PE of
// that PE's shard to it. waits: the caller then waits on the host.
func (c *Comm) enqueueReduceScatter(name string, b comm.Buffer, off, n int, op comm.Op, waits bool) error {
	sb, dt, cop, err := c.reduceArgs(name, b, off, n, op, c.me)
	if err != nil {
		return err
	}
	return c.enqueueSharded(name, sb.call(desync.ReduceScatter, off, n, op, 0), waits, n,
		func(p int) (int, int) { return comm.Shard(off, n, c.npes, p) },
		func(lo, hi, span int) error { return c.lib.ReduceScatterEnqueue(sb.sym, lo, hi, span, dt, cop) },
		func(p, lo, hi int) error { return c.lib.ReduceEnqueue(sb.sym, lo, hi-lo, dt, cop, p) })
}

// IReduceScatter enqueues the reduce-scatter of the part [lo, hi) of
// elements [off, off+n) of the Float32 or BFloat16 buffer b on the stream
// and returns at once; the request's Wait waits for an event recorded after
// it (as IAllReduce's). Each PE's piece of the part (comm.PartShard) is its
// shard for the reduce-scatter kernel, which gives every element
// ReduceScatter's bits; with a peer out of pointer reach, one Reduce per PE
// of its piece to it.
func (c *Comm) IReduceScatter(b comm.Buffer, off, n, lo, hi int, op comm.Op) (comm.Request, error) {
	const name = "ireducescatter"
	if err := c.joined(name); err != nil {
		return nil, err
	}
	if err := c.enqueueReduceScatterPart(name, b, off, n, lo, hi, op); err != nil {
		return nil, err
	}
	return c.record(name)
}

// AllGather copies every PE's shard (comm.Shard) of elements [off, off+n)
// of b (any kind) from that PE's copy into every PE's copy.
func (c *Comm) AllGather(b comm.Buffer, off, n int) error {
	const name = "allgather"
	if err := c.joined(name); err != nil {
		return err
	}
	if err := c.enqueueAllGather(name, b, off, n, true); err != nil {
		return err
	}
	return c.waitStream(name)
}

// AllGatherEnqueue enqueues AllGather on Stream() and returns at once, with
// no event and no host wait, so that it can be captured in a CUDA graph.
func (c *Comm) AllGatherEnqueue(b comm.Buffer, off, n int) error {
	return c.enqueueAllGather("allgather", b, off, n, false)
}

// enqueueAllGather checks an all-gather's arguments and enqueues it: the
// kernel (in bytes), or, with a peer out of pointer reach, one Broadcast
// per PE of its shard. waits: the caller then waits on the host.
func (c *Comm) enqueueAllGather(name string, b comm.Buffer, off, n int, waits bool) error {
	sb, err := c.access(name, b, off, n, c.me)
	if err != nil {
		return err
	}
	es := sb.kind.Size()
	return c.enqueueSharded(name, sb.call(desync.AllGather, off, n, 0, 0), waits, n,
		func(p int) (int, int) { return comm.Shard(off, n, c.npes, p) },
		func(lo, hi, span int) error { return c.lib.AllGatherEnqueue(sb.sym, lo*es, hi*es, span*es) },
		func(p, lo, hi int) error { return c.lib.BroadcastEnqueue(sb.sym, lo*es, (hi-lo)*es, p) })
}

// enqueueSharded enqueues a sharded collective (its fingerprint call) over
// n elements, of which PE p's shard is shard(p), on a healthy Comm: nothing
// with one PE (its shard is the whole range, already what the collective
// leaves) or no elements; while every peer is in pointer reach, kernel with
// this PE's shard [lo, hi) and the largest shard's length; otherwise perPE
// for every PE p and its shard, in PE order (the same calls on every PE).
func (c *Comm) enqueueSharded(name string, call desync.Call, waits bool, n int, shard func(p int) (lo, hi int), kernel func(lo, hi, span int) error, perPE func(p, lo, hi int) error) error {
	if err := c.collective(name); err != nil {
		return err
	}
	if err := c.enter(name, call, waits); err != nil {
		return err
	}
	var err error
	switch {
	case c.npes == 1:
	case n == 0:
		return c.meetEmpty(name)
	case c.info.AllReachable:
		lo, hi, span := c.shard(shard)
		err = kernel(lo, hi, span)
	default:
		for p := 0; p < c.npes && err == nil; p++ {
			lo, hi := shard(p)
			err = perPE(p, lo, hi)
		}
	}
	if err != nil {
		return c.fail(c.libErr(name, err))
	}
	return nil
}

// shard is this PE's shard [lo, hi) of a sharded collective whose PE p has
// shard(p), and span, the length of the largest shard, which the kernels'
// grid is sized by: the same on every PE, because every PE works it out
// from shard for all.
func (c *Comm) shard(shard func(p int) (lo, hi int)) (lo, hi, span int) {
	for p := range c.npes {
		plo, phi := shard(p)
		span = max(span, phi-plo)
		if p == c.me {
			lo, hi = plo, phi
		}
	}
	return lo, hi, span
}
