package ddp

import (
	"fmt"
	"github.com/symddp/symddp/ddp/devicestep"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute"
)

// The sharded update (ZeRO-1) on the device step path. (On host arenas the
// sharded strategy, shardedFinish in step.go, reduce-scatters bucket by
// bucket while backward runs, with comm.Sharder's IReduceScatter, and
// decides on its host; here the whole step is one recorded graph.) Where
// the comm backend reduce-scatters and all-gathers on the engine's stream
// (enqueueSharder: comm/nvshmem) and the engine updates one shard of the
// arena (devicestep.ShardedUpdater: compute/cuda), a step's device work after
// backward is, instead of one allreduce and an update of the whole arena:
//
//   - a reduce-scatter of the gradient arena: PE p ends with the reduced
//     gradients of its shard comm.Shard(0, n, NPEs, p), the allreduce's
//     fold and bits; an allreduce of the few control words after it;
//   - the float64 sum of squares of that shard into this PE's slot of a
//     small symmetric exchange buffer, and an all-gather of the buffer, so
//     that every PE holds every PE's sum;
//   - the update of the shard (parameters, gradients and this PE's 1/NPEs
//     of the optimizer state) with the verdict of those sums added in PE
//     order: a non-finite sum skips the step on every PE, clipping uses
//     their norm (as the host sharded update, shardedFinish, decides);
//   - an all-gather of the parameter arena.
//
// Without clipping the parameters are bit for bit those of the replicated
// update (the same reduced gradients, the same update kernel element by
// element); with it, the norm is summed shard by shard, which may change
// its last bits. A checkpoint gathers the state shards into the (idle)
// gradient arena one slot at a time (gatherDeviceState); a resume
// broadcasts each slot there and every PE keeps its shard (installState).

// enqueueSharder is implemented by comm backends whose reduce-scatter and
// all-gather run on the compute engine's stream (comm/nvshmem), enqueued
// without a host wait so that a CUDA graph can hold them; the blocking
// comm.Sharder methods serve checkpoints.
type enqueueSharder interface {
	comm.Sharder
	ReduceScatterEnqueue(b comm.Buffer, off, n int, op comm.Op) error
	AllGatherEnqueue(b comm.Buffer, off, n int) error
}

// partialStride is the number of float32 words between two PEs' sums of
// squares in the exchange buffer: comm.ShardAlign, so that PE p's shard of
// the buffer is exactly its slot.
const partialStride = comm.ShardAlign

// deviceShard is the state of the sharded device update.
type deviceShard struct {
	s      enqueueSharder
	u      devicestep.ShardedUpdater
	lo, hi int            // this PE's shard of the arenas
	p, g   compute.Tensor // views of the shard in the parameter and gradient arenas (g also stages state shards for checkpoints)
	xchg   comm.Buffer    // symmetric float32, partialStride words per PE
	parts  compute.Tensor // the whole exchange buffer
	mine   compute.Tensor // this PE's two words of it (a float64)
	state  [][]float32    // PE 0: the optimizer state gathered for a checkpoint
}

// deviceSharding sets up the sharded device update for t when the options,
// the backend and the engine allow it; it returns nil (and why, "" for a
// run that did not ask for it) when the update stays replicated. Every PE
// decides alike (the same options, backend and sizes), and the exchange
// buffer is allocated collectively.
func (t *Trainer) deviceSharding() (*deviceShard, string, error) {
	npes, me := t.c.NPEs(), t.c.MyPE()
	if npes == 1 || t.opts.ReplicatedUpdate {
		return nil, "", nil
	}
	s, ok := t.c.(enqueueSharder)
	if !ok {
		return nil, fmt.Sprintf("the %s comm backend has no stream-ordered reduce-scatter and all-gather", t.c.Backend()), nil
	}
	if fo, ok := t.c.(comm.FixedOrderer); ok && !fo.FixedOrder() {
		return nil, "some PE is not reachable by pointer (the sharded collectives need every peer)", nil
	}
	u, ok := t.e.(devicestep.ShardedUpdater)
	if !ok {
		return nil, fmt.Sprintf("the %s engine cannot update a shard of the arena", t.e.Name()), nil
	}
	for p := range npes {
		if lo, hi := comm.Shard(0, t.n, npes, p); hi <= lo {
			return nil, fmt.Sprintf("%d parameters are too few to split among %d PEs", t.n, npes), nil
		}
	}
	d := &deviceShard{s: s, u: u}
	d.lo, d.hi = comm.Shard(0, t.n, npes, me)
	xchg, err := t.c.Alloc(comm.Float32, partialStride*npes)
	if err != nil {
		return nil, "", fmt.Errorf("allocate the sharded update's exchange buffer: %w", err)
	}
	xa, err := arenaOf(xchg)
	if err != nil {
		return nil, "", err
	}
	d.xchg = xchg
	d.parts = t.e.View(xa, 0, partialStride*npes)
	d.mine = t.e.View(xa, partialStride*me, 2)
	d.p = t.e.View(t.pArena, d.lo, d.hi-d.lo)
	d.g = t.e.View(t.gArena, d.lo, d.hi-d.lo)
	return d, "", nil
}

// update enqueues the step's work after the gradients' reduce-scatter (see
// the top of the file).
func (d *deviceShard) update(t *Trainer, lr float32) error {
	npes := t.c.NPEs()
	d.u.SumSquaresInto(d.mine, d.g)
	if err := d.s.AllGatherEnqueue(d.xchg, 0, partialStride*npes); err != nil {
		return fmt.Errorf("gradient norm exchange: %w", err)
	}
	if err := d.u.UpdateShard(t.o, d.p, d.g, d.lo, d.parts, npes, partialStride, t.step, lr, t.opts.ClipNorm); err != nil {
		return fmt.Errorf("optimizer: %w", err)
	}
	if err := d.s.AllGatherEnqueue(t.params, 0, t.n); err != nil {
		return fmt.Errorf("parameter all-gather: %w", err)
	}
	return nil
}

// stateLen is the length of each optimizer state tensor the engine keeps.
func (d *deviceShard) stateLen() int { return d.hi - d.lo }

// gatherState assembles each optimizer state slot from every PE's shard in
// the gradient arena (idle between steps; zeroed after) and copies it to
// the host on PE 0 for the checkpoint (collective).
func (d *deviceShard) gatherState(t *Trainer) error {
	if t.o.Slots() == 0 {
		return nil
	}
	ds, ok := t.e.(DeviceOptimizerState)
	if !ok {
		return fmt.Errorf("engine %s does not expose its optimizer state for checkpoints", t.e.Name())
	}
	ts, err := ds.AllocOptimizerState(t.o, d.stateLen())
	if err != nil {
		return err
	}
	if t.c.MyPE() == 0 && d.state == nil {
		d.state = make([][]float32, len(ts))
		for k := range d.state {
			d.state[k] = make([]float32, t.n)
		}
	}
	for k, st := range ts {
		t.e.Copy(d.g, st)
		if err := d.s.AllGather(t.grads, 0, t.n); err != nil {
			return fmt.Errorf("gather optimizer state: %w", err)
		}
		if t.c.MyPE() == 0 {
			t.e.ReadTensor(d.state[k], t.gView)
		}
	}
	t.e.Zero(t.gView)
	return t.e.Sync()
}
