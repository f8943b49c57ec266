package shm

import (
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/comm/internal/fold"
)

// chunkLen is how many float32 a PE reduces at a time (16 KiB): the chunk of
// results stays in L1 while every peer's copy streams through.
const chunkLen = 4096

// The reduce-scatter's slices (comm.Shard) start on cache lines of the
// buffer, which is aligned to bufAlign (one line), so no two PEs write one line.

// Barrier waits until every PE has called Barrier. Puts are synchronous on
// shm, so they are complete and visible when it returns.
func (c *Comm) Barrier() error {
	if err := c.collective("barrier"); err != nil {
		return err
	}
	return c.enter("barrier", desync.Call{Op: desync.Barrier})
}

// AllReduce reduces elements [off, off+n) of the Float32 buffer b across PEs
// in place; every PE ends with identical bits. Sum is the float32 left fold
// over PEs 0..NPEs-1 and Mean is that sum divided by float32(NPEs()).
func (c *Comm) AllReduce(b comm.Buffer, off, n int, op comm.Op) error {
	return c.reduceOp("allreduce", desync.AllReduce, b, off, n, op, c.me, -1)
}

// Reduce reduces [off, off+n) of the Float32 buffer b across PEs into root's
// copy, with the same arithmetic as AllReduce; other copies are unchanged.
func (c *Comm) Reduce(b comm.Buffer, off, n int, op comm.Op, root int) error {
	return c.reduceOp("reduce", desync.Reduce, b, off, n, op, root, root)
}

// Broadcast copies root's elements [off, off+n) of b (any kind) into every
// PE's copy.
func (c *Comm) Broadcast(b comm.Buffer, off, n int, root int) error {
	const op = "broadcast"
	sb, err := c.enterCopy(op, desync.Broadcast, b, off, n, root)
	if err != nil {
		return err
	}
	if c.me != root {
		es := sb.kind.Size()
		copy(c.bytes(sb, c.me)[off*es:(off+n)*es], c.bytes(sb, root)[off*es:(off+n)*es])
	}
	return c.barrier(op)
}

// enterCopy checks the arguments of collective coll, a copy of [off,
// off+n) of b (any kind; pe is checked as a PE number and is the root of a
// Broadcast), drains the async queue and passes the entry barrier.
func (c *Comm) enterCopy(op string, coll desync.Coll, b comm.Buffer, off, n, pe int) (*buffer, error) {
	sb, err := c.access(op, b, 0, off, n, pe)
	if err != nil {
		return nil, err
	}
	if err := c.collective(op); err != nil {
		return nil, err
	}
	if err := c.enter(op, sb.call(coll, off, n, 0, pe)); err != nil {
		return nil, err
	}
	return sb, nil
}

// reduceOp checks the arguments of reduction coll (root is checked as a PE
// number), drains the async queue and runs reduce into copy dst (-1: all).
func (c *Comm) reduceOp(name string, coll desync.Coll, b comm.Buffer, off, n int, op comm.Op, root, dst int) error {
	sb, err := c.reduceArgs(name, b, off, n, op, root)
	if err != nil {
		return err
	}
	if err := c.collective(name); err != nil {
		return err
	}
	lo, hi := comm.Shard(off, n, c.npes, c.me)
	return c.reduce(name, sb.call(coll, off, n, op, root), sb, lo, hi, op, dst)
}

// reduceArgs checks the arguments of a reduction (root is any valid PE for
// AllReduce).
func (c *Comm) reduceArgs(name string, b comm.Buffer, off, n int, op comm.Op, root int) (*buffer, error) {
	sb, err := c.access(name, b, comm.Float32, off, n, root)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckOp(Name, c.me, name, op); err != nil {
		return nil, err
	}
	return sb, nil
}

// reduce runs the reduce-scatter and all-gather of a range whose slice
// [lo, hi) is this PE's (comm.Shard; comm.PartShard for a part): after an
// entry barrier (which checks call), PE p alone reads and writes its slice
// of every PE's copy, one chunk at a time, writing the result into every
// copy (root < 0) or into root's only; an exit barrier ends it. It does not
// allocate.
func (c *Comm) reduce(name string, call desync.Call, b *buffer, lo, hi int, op comm.Op, root int) error {
	if err := c.enter(name, call); err != nil {
		return err
	}
	for q := range c.views {
		c.views[q] = c.f32(b, q)
	}
	for start := lo; start < hi; start += chunkLen {
		end := min(start+chunkLen, hi)
		acc := c.scratch[:end-start]
		for q, v := range c.views {
			c.ins[q] = v[start:end]
		}
		combine(acc, c.ins, op)
		if root >= 0 {
			copy(c.views[root][start:end], acc)
			continue
		}
		// Start with a different destination on every PE, to spread the writes.
		for k := range c.views {
			copy(c.views[(c.me+k)%c.npes][start:end], acc)
		}
	}
	for q := range c.views {
		c.views[q], c.ins[q] = nil, nil
	}
	return c.barrier(name)
}

// combine reduces the PEs' copies of one chunk into acc, in PE order.
func combine(acc []float32, ins [][]float32, op comm.Op) {
	fold.Fold(acc, ins, op)
	if op == comm.Mean {
		fold.Divide(acc, float32(len(ins)))
	}
}

// ReduceScatter reduces elements [off, off+n) of the Float32 buffer b across
// PEs into this PE's shard (comm.Shard) of its own copy, with AllReduce's
// arithmetic; the rest of its copy is unchanged. Like reduce, but each PE
// writes only its own copy.
func (c *Comm) ReduceScatter(b comm.Buffer, off, n int, op comm.Op) error {
	return c.reduceOp("reducescatter", desync.ReduceScatter, b, off, n, op, c.me, c.me)
}

// AllGather copies every PE's shard of elements [off, off+n) of b into every
// PE's copy: after an entry barrier each PE writes its own shard into its
// peers' copies, starting with a different one on every PE; an exit barrier
// ends it.
func (c *Comm) AllGather(b comm.Buffer, off, n int) error {
	const op = "allgather"
	sb, err := c.enterCopy(op, desync.AllGather, b, off, n, c.me)
	if err != nil {
		return err
	}
	lo, hi := comm.Shard(off, n, c.npes, c.me)
	es := sb.kind.Size()
	src := c.bytes(sb, c.me)[lo*es : hi*es]
	for k := 1; k < c.npes; k++ {
		copy(c.bytes(sb, (c.me+k)%c.npes)[lo*es:hi*es], src)
	}
	return c.barrier(op)
}

var _ comm.Sharder = (*Comm)(nil)
