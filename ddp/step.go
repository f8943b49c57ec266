package ddp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/internal/hostloops"
	"github.com/symddp/symddp/optim"
)

// stepResult is what one optimizer step decided, identically on every PE.
type stepResult struct {
	stop    bool // some PE asked to stop: this was the last step
	skipped bool // non-finite loss or gradients, update skipped
	// waited is how long the host blocked on the device inside the step
	// (the device step path: a pipeline slot, a step's report); 0 elsewhere
	waited time.Duration
}

// ErrNonFinite is returned (wrapped with the step number) when a loss or a
// gradient is NaN or Inf and Options.SkipNonFinite is false.
var ErrNonFinite = errors.New("loss or gradients are not finite")

// sharedError marks an error that every PE of a job returns alike, having
// decided it together. origin is the PE whose own action failed (PE 0,
// which reads and writes checkpoints), -1 when the verdict is the job's.
type sharedError struct {
	error
	origin int
}

func (e sharedError) Unwrap() error { return e.error }

// OriginPE is the PE whose action the error is about, -1 for none; the
// launcher names it (comm/launch.ReportFailure).
func (e sharedError) OriginPE() int { return e.origin }

// shared marks err as one every PE returns alike (nil stays nil).
func shared(err error) error {
	return sharedFrom(-1, err)
}

// sharedFrom marks err as one every PE returns alike, about what PE pe did.
func sharedFrom(pe int, err error) error {
	if err == nil {
		return nil
	}
	return sharedError{err, pe}
}

// Shared reports whether every PE of the job returns err alike, because
// the PEs decided it together: a non-finite step (the reduced verdict), a
// checkpoint PE 0 could not write (ErrCheckpointSave), a resume PE 0
// refused, replicas found to differ. A job without a launcher to gather
// its PEs' errors (mpirun) can print such an error on one rank only;
// anything else (a PE's own I/O, memory, a peer lost) each PE reports.
func Shared(err error) bool {
	var s sharedError
	return errors.As(err, &s) || errors.Is(err, ErrNonFinite) || errors.Is(err, ErrCheckpointSave)
}

// hostStep runs optimizer step number t.step+1 on global batch (epoch, s)
// with the arenas in host memory or the micro-batches run eagerly: forward
// and backward of each micro-batch, then finish, the strategy's wait for
// the reduction and its update. The last micro-batch's backward starts the
// reduction of each gradient bucket as it finishes (t.ready): an allreduce
// (replicated), or a reduce-scatter onto the owners of the arena's shards
// (sharded). wantStop is this PE's wish to stop (a signal); the decision
// is shared.
func (t *Trainer) hostStep(sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool,
	finish func(epoch, s int) (stepResult, error)) (stepResult, error) {
	e := t.e
	sm.Batch(epoch, s, t.idx)
	scale := t.lossScale(sm, ds, epoch, s)
	host := t.pArena.Host != nil
	k := t.opts.Accumulate
	if host {
		e.ReadTensor(t.statsBefore, t.stats)
	}
	for j := 0; j < k; j++ {
		t.load(ds, t.idx[j*t.micro:(j+1)*t.micro])
		t.m.Forward(t.in, scale, t.stats)
		t.lastMicro = j == k-1
		if t.lastMicro {
			t.ctrl = [ctrlWords]float32{}
			if wantStop {
				t.ctrl[ctrlStop] = 1
			}
			if host {
				e.ReadTensor(t.stats3[:], t.stats)
				if !finite32(t.stats3[0]) {
					t.ctrl[ctrlNonFinite] = 1
				}
			}
			e.SetTensor(t.ctrlView, t.ctrl[:])
			t.pendingEnd = t.reducedEnd()
			t.reqs = t.reqs[:0]
			t.bucketErr = nil
		}
		t.m.Backward(t.readyFn)
		if !t.lastMicro {
			if j == 0 {
				e.Copy(t.acc, t.gView)
			} else {
				e.Accumulate(t.acc, t.gView)
			}
		}
	}
	return finish(epoch, s)
}

// load copies this PE's rows of a micro-batch from ds onto the engine.
func (t *Trainer) load(ds datasets.Source, rows []int) {
	e := t.e
	ds.GatherBatch(rows, t.batch)
	if t.spec.Tokens {
		e.SetLabels(t.in.Tokens, t.batch.Tokens)
	} else if t.pArena.Host == nil || compute.HostData(t.x) == nil {
		e.SetTensor(t.x, t.batch.X)
	}
	e.SetLabels(t.in.Targets, t.batch.Y)
}

// lossScale is the scale of global step (epoch, s)'s summed loss that
// makes its gradient the mean's over the targets the loss counts: 1 / the
// labelled targets (not -1) of every PE's rows, which each PE counts alike
// from the sampler's global batch, before backward. For the built-in
// sources that is the rows that are not padding x the targets of a sample;
// a Source whose samples hold -1 targets (masked tokens) gets the gradient
// of the loss it prints, where scaling by the rows gave that of another
// (each -1 diluted the rest). 0 when no target is labelled.
func (t *Trainer) lossScale(sm *datasets.ShardSampler, ds datasets.Source, epoch, s int) float32 {
	sm.StepRows(epoch, s, t.rows)
	n := 0
	if tc, ok := ds.(datasets.TargetCounter); ok {
		n = tc.LabelledTargets(t.rows)
	} else {
		n = t.gatheredTargets(ds)
	}
	if n == 0 {
		return 0
	}
	return 1 / float32(n)
}

// gatheredTargets gathers t.rows from ds, a micro-batch at a time, and
// counts their targets that are not -1.
func (t *Trainer) gatheredTargets(ds datasets.Source) int {
	b := &t.countRows
	if b.Y == nil {
		in := t.spec.InputSize()
		if t.spec.Tokens {
			b.Tokens = make([]int32, t.micro*in)
		} else {
			b.X = make([]float32, t.micro*in)
		}
		b.Y = make([]int32, t.micro*t.spec.Targets)
	}
	n := 0
	for lo := 0; lo < len(t.rows); lo += t.micro { // the global batch is whole micro-batches
		ds.GatherBatch(t.rows[lo:lo+t.micro], *b)
		for _, v := range b.Y {
			if v != -1 {
				n++
			}
		}
	}
	return n
}

// reducedEnd is the end of the gradient arena's elements that the buckets
// reduce: the gradients and, on the replicated path, the control words
// after them (the sharded update exchanges its verdicts after backward).
func (t *Trainer) reducedEnd() int {
	if t.sharder != nil {
		return t.n
	}
	return t.n + ctrlWords
}

// waitBuckets starts the reduction of what backward left pending (the
// first bucket, or everything when backward reported nothing) and waits
// for every bucket's; what names the reduction in the error.
func (t *Trainer) waitBuckets(what string) error {
	if t.pendingEnd > 0 {
		t.issue(0)
	}
	var errs []error
	if t.bucketErr != nil {
		errs = append(errs, t.bucketErr)
	}
	for _, r := range t.reqs {
		if err := r.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("step %d: %s: %w", t.step+1, what, errors.Join(errs...))
	}
	return nil
}

// replicatedFinish ends a step of the replicated strategy after backward:
// the last bucket's allreduce, a wait for all of them, the shared verdict on
// stopping and finiteness, and the update of the whole arena.
func (t *Trainer) replicatedFinish(epoch, s int) (stepResult, error) {
	e := t.e
	host := t.pArena.Host != nil
	if err := t.waitBuckets("gradient allreduce"); err != nil {
		return stepResult{}, err
	}
	e.ReadTensor(t.ctrl[:], t.ctrlView)
	res := stepResult{stop: t.ctrl[ctrlStop] > 0}
	nonFinite := t.ctrl[ctrlNonFinite] > 0
	if host && !nonFinite && !hostloops.AllFinite(t.gArena.Host[:t.n]) {
		// The reduced gradients are identical on every PE, so every PE
		// reaches the same verdict without communicating.
		nonFinite = true
	}
	if nonFinite {
		return t.skipStep(res, epoch, s)
	}
	if err := t.update(); err != nil {
		return res, fmt.Errorf("step %d: optimizer: %w", t.step+1, err)
	}
	return res, nil
}

// skipStep ends a step whose loss or gradients are not finite: an error,
// or with SkipNonFinite a step counted but not applied; host engines put
// back the metrics window as the step found it (statsBefore).
func (t *Trainer) skipStep(res stepResult, epoch, s int) (stepResult, error) {
	if !t.opts.SkipNonFinite {
		return res, fmt.Errorf("step %d (epoch %d, batch %d): %w; lower the learning rate, clip gradients (--clip-norm) or pass --skip-nonfinite",
			t.step+1, epoch, s, ErrNonFinite)
	}
	if t.pArena.Host != nil {
		t.e.SetTensor(t.stats, t.statsBefore) // keep the window's metrics finite
	}
	res.skipped = true
	t.step++
	return res, nil
}

// shardedFinish ends a step of the sharded update (ZeRO-1) after backward:
// the last bucket's reduce-scatter and a wait for all of them, after which
// each PE holds the summed gradients of its shard; every PE checks (and,
// for clipping, sums the squares of) its shard and writes its verdicts
// into every PE's row of the exchange buffer; after a barrier each PE
// folds the rows in PE order, so all reach the same decision and the same
// norm; then each updates its shard of the parameters and optimizer state,
// and an all-gather spreads the parameters.
func (t *Trainer) shardedFinish(epoch, s int) (stepResult, error) {
	step := t.step + 1
	if err := t.waitBuckets("gradient reduce-scatter"); err != nil {
		return stepResult{}, err
	}
	lo, hi := t.shardLo, t.shardHi
	g := t.gArena.Host[lo:hi:hi]
	row := t.xrow // made once: a local array would escape to the heap every step through PutBytes
	clear(row)
	row[0] = flagByte(t.ctrl[ctrlStop] > 0)
	row[1] = flagByte(t.ctrl[ctrlNonFinite] > 0)
	if t.opts.ClipNorm > 0 {
		// One pass for both: a float64 sum of float32 squares is finite
		// exactly when every gradient is.
		ss := optim.SumSquares(g)
		row[2] = flagByte(math.IsNaN(ss) || math.IsInf(ss, 0))
		binary.LittleEndian.PutUint64(row[8:], math.Float64bits(ss))
	} else {
		row[2] = flagByte(!hostloops.AllFinite(g))
	}
	me := t.c.MyPE()
	half := (step & 1) * len(t.xall) // see xchgRow
	for pe := range t.c.NPEs() {
		if err := t.c.PutBytes(t.xchg, half+me*xchgRow, row, pe); err != nil {
			return stepResult{}, fmt.Errorf("step %d: exchange: %w", step, err)
		}
	}
	if err := t.c.Barrier(); err != nil {
		return stepResult{}, fmt.Errorf("step %d: exchange: %w", step, err)
	}
	if err := t.c.GetBytes(t.xall, t.xchg, half, me); err != nil {
		return stepResult{}, fmt.Errorf("step %d: exchange: %w", step, err)
	}
	var res stepResult
	nonFinite, sumSq := false, 0.0
	for q := 0; q < len(t.xall); q += xchgRow {
		r := t.xall[q : q+xchgRow]
		res.stop = res.stop || r[0] != 0
		nonFinite = nonFinite || r[1] != 0 || r[2] != 0
		sumSq += math.Float64frombits(binary.LittleEndian.Uint64(r[8:]))
	}
	if nonFinite {
		return t.skipStep(res, epoch, s)
	}
	t.step++
	lr := t.opts.lr(t.step)
	if t.opts.ClipNorm > 0 {
		if f, ok := optim.ClipFactor(math.Sqrt(sumSq), t.opts.ClipNorm); ok {
			optim.Scale(g, f)
		}
	}
	applyUpdate(t.shardSegs, lo, t.pArena.Host[lo:hi:hi], g, t.step, lr)
	if err := t.sharder.AllGather(t.params, 0, t.n); err != nil {
		return res, fmt.Errorf("step %d: parameter all-gather: %w", t.step, err)
	}
	return res, nil
}

func flagByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// ready is the model's signal that the gradients of parameters first.. are
// final: once a bucket's worth is pending, its reduction starts.
func (t *Trainer) ready(first int) {
	if !t.lastMicro || first < 0 || first >= len(t.offsets) {
		return
	}
	if t.acc != nil && t.accArena.Host == nil {
		return // device accumulator: folded in whole after backward
	}
	lo := t.offsets[first]
	if t.pendingEnd-lo >= t.bucketElems {
		t.issue(lo)
	}
}

// issue starts the reduction of gradient elements [lo, pendingEnd), first
// folding in the accumulated micro-batches: an allreduce (replicated), or
// the reduce-scatter of that part of the arena onto the owners of its
// shards (sharded), which leaves each PE's shard the bits one
// reduce-scatter of the whole arena would.
func (t *Trainer) issue(lo int) {
	hi := t.pendingEnd
	if hi <= lo {
		return
	}
	if t.acc != nil {
		if t.accArena.Host == nil {
			t.e.Accumulate(t.gView, t.acc) // lo is 0 here: see ready
		} else if top := min(hi, t.n); top > lo {
			g, a := t.rangeViews(lo, top)
			t.e.Accumulate(g, a)
		}
	}
	t.pendingEnd = lo
	if t.c.NPEs() == 1 {
		return // the sum over one PE is its own gradient: nothing to send or wait for
	}
	var r comm.Request
	var err error
	if t.sharder != nil {
		r, err = t.sharder.IReduceScatter(t.grads, 0, t.n, lo, hi, comm.Sum)
	} else {
		r, err = t.c.IAllReduce(t.grads, lo, hi-lo, comm.Sum)
	}
	if err != nil {
		if t.bucketErr == nil {
			t.bucketErr = err
		}
	} else {
		t.reqs = append(t.reqs, r)
	}
}

// rangeViews returns cached views of gradient and accumulator elements
// [lo, hi) (the accumulator's nil without accumulation), on the host path
// and the device path's overlapped reduction alike: bucket boundaries
// repeat every step, so views are made once.
func (t *Trainer) rangeViews(lo, hi int) (g, a compute.Tensor) {
	key := [2]int{lo, hi}
	if v, ok := t.views[key]; ok {
		return v[0], v[1]
	}
	if t.views == nil {
		t.views = map[[2]int][2]compute.Tensor{}
	}
	g = t.e.View(t.gArena, lo, hi-lo)
	if t.acc != nil {
		a = t.e.View(t.accArena, lo, hi-lo)
	}
	t.views[key] = [2]compute.Tensor{g, a}
	return g, a
}

// update applies the optimizer to the parameter arena.
func (t *Trainer) update() error {
	t.step++
	lr := t.opts.lr(t.step)
	if t.pArena.Host != nil {
		g := t.gArena.Host[:t.n]
		if t.opts.ClipNorm > 0 {
			optim.ClipGlobalNorm(g, t.opts.ClipNorm)
		}
		applyUpdate(t.segs, 0, t.pArena.Host, g, t.step, lr)
		return nil
	}
	du, ok := t.e.(DeviceUpdater)
	if !ok {
		return fmt.Errorf("engine %s keeps parameters on a device but cannot run optimizer %s there", t.e.Name(), t.o.Name())
	}
	return du.Update(t.o, t.pView, t.gView, t.step, lr, t.opts.ClipNorm)
}

// DeviceUpdater is implemented by engines that keep the arenas in device
// memory: they run the optimizer (and gradient clipping) there, keeping
// its state in device memory too.
type DeviceUpdater interface {
	// Update clips grads to a global norm of clipNorm (0: no clipping) and
	// applies step number step of o, with learning rate lr, to params.
	Update(o optim.Optimizer, params, grads compute.Tensor, step int, lr float32, clipNorm float32) error
}

func finite32(v float32) bool {
	f := float64(v)
	return !math.IsNaN(f) && !math.IsInf(f, 0)
}
