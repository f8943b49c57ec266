//go:build mpi

package mpi

import (
	"unsafe"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/comm/internal/fold"
)

// beginCollective prepares a collective: it waits until every IAllReduce
// issued before has run (so the PEs see their collectives in one order),
// takes mu and checks that the Comm is open and healthy. On success the
// caller holds mu and must release it.
func (c *Comm) beginCollective(op string) error {
	if c.closed.Load() {
		return c.closedErr(op)
	}
	c.async.Drain()
	c.mu.Lock()
	if err := c.usableLocked(op); err != nil {
		c.mu.Unlock()
		return err
	}
	return nil
}

// Barrier completes this PE's outstanding puts, waits until every PE has
// called Barrier (MPI_Barrier), and then synchronises this PE's view of
// every window (MPI_Win_sync), so that what peers put before the barrier is
// visible after it.
func (c *Comm) Barrier() error {
	const op = "barrier"
	if err := c.beginCollective(op); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if err := c.barrierLocked(op, desync.Barrier); err != nil {
		return err
	}
	for _, b := range c.live {
		if b.n > 0 {
			if err := cWinSync(b.w); err != nil {
				return c.fail(op, err)
			}
		}
	}
	return nil
}

// AllReduce reduces elements [off, off+n) of the Float32 buffer b across PEs
// in place (MPI_Allreduce with MPI_IN_PLACE on the window's memory). Every PE
// ends with the same bits; Mean is the Sum divided by float32(NPEs()).
func (c *Comm) AllReduce(b comm.Buffer, off, n int, op comm.Op) error {
	const name = "allreduce"
	mb, err := c.beginReduce(name, b, off, n, op, c.me)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	return c.allReduceLocked(name, mb.call(desync.AllReduce, off, n, op, 0), mb, off, n, op)
}

// allReduceLocked runs one allreduce, collective call; the caller holds mu.
func (c *Comm) allReduceLocked(name string, call desync.Call, b *buffer, off, n int, op comm.Op) error {
	if err := c.enter(name, call); err != nil {
		return err
	}
	if c.hier.on && c.hier.nlocal > 1 && n > 0 {
		return c.hierReduce(name, b, off, n, op, -1)
	}
	p := b.at(off)
	if err := c.call(name, waitAll, func() error { return cAllReduce(p, int64(n), mpiOp(op)) }); err != nil {
		return err
	}
	if op == comm.Mean {
		fold.Divide(b.floats(off, n), float32(c.npes))
	}
	return nil
}

// Reduce reduces [off, off+n) of the Float32 buffer b across PEs into root's
// copy (MPI_Reduce, in place at the root); the other copies are unchanged.
func (c *Comm) Reduce(b comm.Buffer, off, n int, op comm.Op, root int) error {
	const name = "reduce"
	mb, err := c.beginReduce(name, b, off, n, op, root)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	if err := c.enter(name, mb.call(desync.Reduce, off, n, op, root)); err != nil {
		return err
	}
	if c.FixedOrder() && c.npes > 1 && n > 0 {
		return c.hierReduce(name, mb, off, n, op, root)
	}
	p := mb.at(off)
	if err := c.call(name, waitAll, func() error { return cReduce(p, int64(n), mpiOp(op), root, c.me) }); err != nil {
		return err
	}
	if op == comm.Mean && c.me == root {
		fold.Divide(mb.floats(off, n), float32(c.npes))
	}
	return nil
}

// Broadcast copies root's elements [off, off+n) of b (any kind) into every
// PE's copy (MPI_Bcast).
func (c *Comm) Broadcast(b comm.Buffer, off, n int, root int) error {
	const name = "broadcast"
	mb, err := c.beginCopy(name, desync.Broadcast, b, off, n, root)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	p, bytes := mb.at(off), int64(n)*int64(mb.kind.Size())
	return c.call(name, waitAll, func() error { return cBcast(p, bytes, root) })
}

// beginCopy checks the arguments of collective coll, a copy of [off, off+n)
// of b (any kind; pe is checked as a PE number and is a Broadcast's root),
// begins the collective and reports this PE's arrival; on success the
// caller holds mu and must unlock it.
func (c *Comm) beginCopy(name string, coll desync.Coll, b comm.Buffer, off, n, pe int) (*buffer, error) {
	mb, err := c.access(name, b, 0, off, n, pe)
	if err != nil {
		return nil, err
	}
	if err := c.beginCollective(name); err != nil {
		return nil, err
	}
	if err := c.enter(name, mb.call(coll, off, n, 0, pe)); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	return mb, nil
}

// beginReduce checks a reduction's arguments and begins the collective
// (beginCollective); on success the caller holds mu and must unlock it.
func (c *Comm) beginReduce(name string, b comm.Buffer, off, n int, op comm.Op, root int) (*buffer, error) {
	mb, err := c.reduceArgs(name, b, off, n, op, root)
	if err != nil {
		return nil, err
	}
	if err := c.beginCollective(name); err != nil {
		return nil, err
	}
	return mb, nil
}

// reduceArgs checks the arguments of a reduction (root is any valid PE for
// AllReduce). It reads only what does not change under a running
// collective, so it does not take mu.
func (c *Comm) reduceArgs(name string, b comm.Buffer, off, n int, op comm.Op, root int) (*buffer, error) {
	mb, err := c.access(name, b, comm.Float32, off, n, root)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckOp(Name, c.me, name, op); err != nil {
		return nil, err
	}
	return mb, nil
}

// mpiOp is the operator code of capi.go's sd_op: Mean is reduced as Sum.
func mpiOp(op comm.Op) int {
	if op == comm.Mean {
		return int(comm.Sum)
	}
	return int(op)
}

var _ comm.Sharder = (*Comm)(nil)

// ReduceScatter reduces elements [off, off+n) of the Float32 buffer b across
// PEs into this PE's shard (comm.Shard) of its own copy; the rest of the
// copy is unchanged. Flat mode: MPI_Reduce_scatter into scratch memory, then
// the PE's block is copied into its shard (MPI adds in its own order, so the
// bits may differ from AllReduce's, but the parameters an all-gather then
// spreads are the same on every PE). Hierarchical mode keeps its fixed
// order: on one host every PE folds its shard straight into its own copy
// (hierReduce with itself as the root: local PE numbers are PE numbers, and
// its local slice is its shard); across hosts, an allreduce of the range,
// after which the elements outside the shard are put back.
func (c *Comm) ReduceScatter(b comm.Buffer, off, n int, op comm.Op) error {
	const name = "reducescatter"
	mb, err := c.beginReduce(name, b, off, n, op, c.me)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	return c.reduceScatterLocked(name, mb.call(desync.ReduceScatter, off, n, op, 0), mb, off, n, off, off+n, op)
}

// reduceScatterLocked runs the reduce-scatter of the part [lo, hi) of
// elements [off, off+n) (the whole range for ReduceScatter), collective
// call, as ReduceScatter describes, with this PE's piece of the part
// (comm.PartShard) for its shard: MPI_Reduce_scatter's counts are the
// pieces, the fixed-order fold on one host folds the piece, and elsewhere
// the part is allreduced and the elements outside the piece are put back.
// The caller holds mu.
func (c *Comm) reduceScatterLocked(name string, call desync.Call, mb *buffer, off, n, lo, hi int, op comm.Op) error {
	plo, phi := comm.PartShard(off, n, c.npes, c.me, lo, hi)
	if c.FixedOrder() && c.npes > 1 && hi > lo {
		if err := c.enter(name, call); err != nil {
			return err
		}
		return c.hierReduceSlice(name, mb, plo, phi, op, c.me)
	}
	xs := mb.floats(0, mb.n)
	counts, _, fits := c.partBlocks(off, n, lo, hi, 1)
	if c.hier.on && c.hier.nlocal > 1 || !fits {
		below := plo - lo
		save := c.scratchFloats(hi - lo - (phi - plo))
		copy(save, xs[lo:plo])
		copy(save[below:], xs[phi:hi])
		if err := c.allReduceLocked(name, call, mb, lo, hi-lo, op); err != nil {
			return err
		}
		copy(xs[lo:plo], save[:below])
		copy(xs[phi:hi], save[below:])
		return nil
	}
	if err := c.enter(name, call); err != nil {
		return err
	}
	if hi == lo {
		return nil
	}
	recv := c.scratchFloats(max(phi-plo, 1))
	if err := c.call(name, waitAll, func() error {
		return cReduceScatter(mb.at(lo), unsafe.Pointer(&recv[0]), counts, mpiOp(op))
	}); err != nil {
		return err
	}
	copy(xs[plo:phi], recv[:phi-plo])
	if op == comm.Mean {
		fold.Divide(xs[plo:phi], float32(c.npes))
	}
	return nil
}

// AllGather copies every PE's shard of elements [off, off+n) of b (any
// kind) into every PE's copy (MPI_Allgatherv in place).
func (c *Comm) AllGather(b comm.Buffer, off, n int) error {
	const name = "allgather"
	mb, err := c.beginCopy(name, desync.AllGather, b, off, n, c.me)
	if err != nil {
		return err
	}
	defer c.mu.Unlock()
	es := mb.kind.Size()
	counts, displs, fits := c.shardBlocks(off, n, es)
	if n == 0 {
		return nil
	}
	if !fits {
		// Byte counts past MPI's int: every shard from its owner by
		// MPI_Bcast, which sends in chunks.
		for p := range c.npes {
			lo, hi := comm.Shard(off, n, c.npes, p)
			at, bytes := mb.at(lo), int64(hi-lo)*int64(es)
			if bytes == 0 {
				continue
			}
			if err := c.call(name, waitAll, func() error { return cBcast(at, bytes, p) }); err != nil {
				return err
			}
		}
		return nil
	}
	return c.call(name, waitAll, func() error { return cAllgatherBytes(mb.at(off), counts, displs) })
}

// shardBlocks returns every PE's shard of [off, off+n) as MPI counts and
// displacements relative to off, in units of unit bytes, and whether they
// fit MPI's int.
func (c *Comm) shardBlocks(off, n, unit int) (counts, displs []int32, fits bool) {
	return c.partBlocks(off, n, off, off+n, unit)
}

// partBlocks is shardBlocks for every PE's piece (comm.PartShard) of the
// part [lo, hi) of [off, off+n), displacements relative to lo.
func (c *Comm) partBlocks(off, n, lo, hi, unit int) (counts, displs []int32, fits bool) {
	if len(c.counts) != c.npes {
		c.counts, c.displs = make([]int32, c.npes), make([]int32, c.npes)
	}
	fits = true
	for p := range c.npes {
		plo, phi := comm.PartShard(off, n, c.npes, p, lo, hi)
		cnt, disp := int64(phi-plo)*int64(unit), int64(plo-lo)*int64(unit)
		if cnt > c.maxCount || disp > c.maxCount {
			fits = false
		}
		c.counts[p], c.displs[p] = int32(cnt), int32(disp)
	}
	return c.counts, c.displs, fits
}

// scratchFloats returns scratch host memory for at least n floats, kept for
// the next call.
func (c *Comm) scratchFloats(n int) []float32 {
	if cap(c.scratch) < n {
		c.scratch = make([]float32, n)
	}
	return c.scratch[:n]
}
