package cuda

import (
	"fmt"
	"github.com/symddp/symddp/ddp/devicestep"
	"math"
	"unsafe"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/optim"
)

// updater is the optimizer state the engine keeps in device memory.
type updater struct {
	kind  string
	n     int
	slots []*Tensor // Slots() vectors of n, in StateNames order
	halt  bool      // SetHaltOnNonFinite
}

// Update applies optimizer step step (1, 2, ...) with learning rate lr to
// params from grads, both whole arenas of the same size, on the device:
// ddp's DeviceUpdater. Two kernels: a deterministic norm of grads that
// decides whether the step is skipped (some gradient is NaN or Inf) and,
// when clipNorm > 0, the clip factor (optim.ClipFactor); then the update,
// the exact float32 sequence of o's doc comment, bit for bit what o.Update
// computes on the host. The optimizer state (o.Slots() vectors) is
// allocated in device memory on first use and kept (OptimizerState). The
// verdict is in the status words (StatusTensor, UpdateStatus).
//
// While a graph is being captured, the step's values (learning rate, bias
// corrections, step 1) are read from the step block at launch time: step
// and lr only serve to check the arguments.
func (e *Engine) Update(o optim.Optimizer, params, grads compute.Tensor, step int, lr float32, clipNorm float32) error {
	return e.update("Update", o, e.tensorOf("Update", params), e.tensorOf("Update", grads), shardCheck{}, step, lr, clipNorm)
}

var _ devicestep.ShardedUpdater = (*Engine)(nil)

// SumSquaresInto enqueues the float64 sum of the squares of x's elements
// into dst, two float32 words (8-byte aligned) that then hold the
// float64's bits: the sum SumSquares returns and Update's gradient check
// takes over the same elements, added in the same order. It does not wait
// and can be recorded in a graph. For the sharded update: a PE's part of
// the gradient check of UpdateShard.
func (e *Engine) SumSquaresInto(dst, x compute.Tensor) {
	d, s := e.tensorOf("SumSquaresInto", dst), e.tensorOf("SumSquaresInto", x)
	if d.size != 2 {
		compute.PanicShape("cuda", "SumSquaresInto", "a dst of 2 words (one float64)", d.shape)
	}
	if d.ptr%8 != 0 {
		panic(fmt.Sprintf("cuda: SumSquaresInto: dst at %#x is not 8-byte aligned", d.ptr))
	}
	e.fail("SumSquaresInto", e.dev.SumSquaresEnqueue(s.ptr, s.size, d.ptr))
}

// UpdateShard is Update over one PE's shard of the arena (the sharded
// update, ZeRO-1): params and grads are elements [off, off+len) of the
// arena, the optimizer state is kept for those len elements only (so
// OptimizerState returns tensors of len), the weight-decay exemptions of
// SetDecayExempt, which must cover off+len, apply from element off, and the
// gradient check does not read grads: it adds, from 0 in this order, the
// nparts float64 values at float32 word offsets 0, stride, 2*stride, ... of
// partials (each PE's SumSquaresInto of its shard, gathered from every PE
// in PE order; the first 8-byte aligned, stride even), and decides from
// their sum as Update does from its own, so that every PE skips, clips and
// reports the same norm alike: the fold of ddp's host sharded update.
//
// While a graph is being captured, the step's values come from the step
// block at launch time, as for Update; partials is read when the graph
// runs.
func (e *Engine) UpdateShard(o optim.Optimizer, params, grads compute.Tensor, off int, partials compute.Tensor, nparts, stride int, step int, lr, clipNorm float32) error {
	const op = "UpdateShard"
	p, g, q := e.tensorOf(op, params), e.tensorOf(op, grads), e.tensorOf(op, partials)
	if off < 0 {
		return fmt.Errorf("cuda: %s: shard at element %d", op, off)
	}
	if nparts < 1 || (nparts > 1 && stride < 2) || stride%2 != 0 || q.ptr%8 != 0 || (nparts-1)*stride+2 > q.size {
		return fmt.Errorf("cuda: %s: %d float64 partial sums %d words apart in a tensor of %d words at %#x (want at least 1, 8-byte aligned, an even stride of 2 or more)",
			op, nparts, stride, q.size, q.ptr)
	}
	return e.update(op, o, p, g, shardCheck{off: off, parts: q.ptr, nparts: nparts, strideBytes: 4 * stride}, step, lr, clipNorm)
}

// shardCheck is where UpdateShard's shard lies in the arena and where its
// gradient check reads the PEs' sums; the zero value is Update's whole
// arena, whose check sums its gradients itself.
type shardCheck struct {
	off                 int
	parts               uintptr
	nparts, strideBytes int
}

// update is Update and UpdateShard (sh): the checks of the arguments, the
// optimizer state, and the kernels.
func (e *Engine) update(op string, o optim.Optimizer, p, g *Tensor, sh shardCheck, step int, lr, clipNorm float32) error {
	if p.size != g.size {
		return fmt.Errorf("cuda: %s: %d gradients for %d parameters", op, g.size, p.size)
	}
	if step < 1 {
		return fmt.Errorf("cuda: %s: step %d, steps count from 1", op, step)
	}
	if !(lr >= 0) || math.IsInf(float64(lr), 1) {
		return fmt.Errorf("cuda: %s: learning rate %g", op, lr)
	}
	if !(clipNorm >= 0) {
		return fmt.Errorf("cuda: %s: clip norm %g", op, clipNorm)
	}
	h := o.Hyper()
	args, err := optimArgs(h, clipNorm)
	if err != nil {
		return err
	}
	slots, err := e.stateFor(op, o, p.size)
	if err != nil {
		return err
	}
	args.HaltOnSkip = e.opt.halt
	var s0, s1 uintptr
	if len(slots) > 0 {
		s0 = slots[0].ptr
	}
	if len(slots) > 1 {
		s1 = slots[1].ptr
	}
	if e.err != nil {
		return e.err
	}
	var ex uintptr
	if e.exempt != nil {
		if sh.parts == 0 && e.exemptN != p.size {
			return fmt.Errorf("cuda: %s of %d elements, the weight-decay exemptions (SetDecayExempt) are for %d", op, p.size, e.exemptN)
		}
		if sh.off+p.size > e.exemptN {
			return fmt.Errorf("cuda: %s of elements [%d, %d), the weight-decay exemptions (SetDecayExempt) are for %d", op, sh.off, sh.off+p.size, e.exemptN)
		}
		ex = e.exempt.ptr + uintptr(sh.off) // a byte per element
	}
	block := e.capture.active
	if block {
		e.capture.hyper = h
		e.capture.updates++
	}
	var cp, cur uintptr
	var clo, cn int
	if sh.parts == 0 { // a shard's copy would be stale past the shard after the gather: Cast casts
		cp, clo, cn, cur = e.copyFor(p)
	}
	e.fail(op, e.dev.Update(args, stepValues(h, step, lr), block, p.ptr, g.ptr, s0, s1, ex, p.size, sh.parts, sh.nparts, sh.strideBytes, cp, clo, cn, cur))
	return e.err
}

// SetDecayExempt makes every later Update of an arena of n elements leave
// the elements of spans ([lo, hi) pairs) without weight decay: for them the
// update is the optimizer's with weight decay 0, as ddp's host path runs
// exempt parameters (ParamSpec.NoDecay). A mask of n bytes in device
// memory, made once (call it at build time).
func (e *Engine) SetDecayExempt(n int, spans [][2]int) error {
	mask := make([]byte, 4*((n+3)/4))
	for _, sp := range spans {
		if sp[0] < 0 || sp[1] > n || sp[0] > sp[1] {
			return fmt.Errorf("cuda: SetDecayExempt: span %v outside an arena of %d", sp, n)
		}
		for i := sp[0]; i < sp[1]; i++ {
			mask[i] = 1
		}
	}
	if e.exempt == nil || e.exemptN != n {
		e.exempt = e.Alloc(len(mask) / 4).(*Tensor)
	}
	e.exemptN = n
	e.SetTensor(e.exempt, unsafe.Slice((*float32)(unsafe.Pointer(&mask[0])), len(mask)/4))
	return e.Sync()
}

// optimArgs translates an optimizer's hyperparameters for the kernels.
func optimArgs(h optim.Hyper, clipNorm float32) (cudalib.OptimArgs, error) {
	a := cudalib.OptimArgs{MaxNorm: clipNorm}
	switch h.Kind {
	case "sgd":
		a.Kind, a.Momentum, a.Nesterov, a.WeightDecay = cudalib.SGD, h.Momentum, h.Nesterov, h.WeightDecay
		return a, nil
	case "adam", "adamw":
		a.Kind = cudalib.Adam
		a.WeightDecay = h.WeightDecay // L2
		if h.Kind == "adamw" {
			a.Kind = cudalib.AdamW
			a.WeightDecay = 0 // decoupled: StepValues.Decay
		}
		a.Beta1, a.Beta2, a.Eps = h.Beta1, h.Beta2, h.Eps
		a.C1, a.C2 = 1-h.Beta1, 1-h.Beta2 // float32, as optim computes them
		return a, nil
	}
	return a, fmt.Errorf("cuda: Update: no device kernel for optimizer %q", h.Kind)
}

// stateFor returns the optimizer state for o over n parameters, allocating
// it on first use (op names the caller in errors).
func (e *Engine) stateFor(op string, o optim.Optimizer, n int) ([]*Tensor, error) {
	u := &e.opt
	if u.kind != "" {
		if u.kind != o.Name() || u.n != n || len(u.slots) != o.Slots() {
			return nil, fmt.Errorf("cuda: %s: the engine keeps state for %s over %d parameters (%d slots), not %s over %d (%d slots)",
				op, u.kind, u.n, len(u.slots), o.Name(), n, o.Slots())
		}
		return u.slots, nil
	}
	if e.capture.active {
		return nil, fmt.Errorf("cuda: %s: the first update allocates the optimizer state and cannot be captured", op)
	}
	u.kind, u.n = o.Name(), n
	for i := 0; i < o.Slots(); i++ {
		u.slots = append(u.slots, e.Alloc(n).(*Tensor))
	}
	return u.slots, nil
}

// AllocOptimizerState allocates (once) the device state of o over n
// parameters, for a checkpoint to restore before the first Update, and
// returns it as OptimizerState does.
func (e *Engine) AllocOptimizerState(o optim.Optimizer, n int) ([]compute.Tensor, error) {
	if _, err := e.stateFor("AllocOptimizerState", o, n); err != nil {
		return nil, err
	}
	return e.OptimizerState(), nil
}

// OptimizerState returns the optimizer's state vectors in device memory, in
// the order of the optimizer's StateNames (nil before the first Update):
// read them with ReadTensor to save a checkpoint, write them with
// SetTensor to restore one.
func (e *Engine) OptimizerState() []compute.Tensor {
	out := make([]compute.Tensor, len(e.opt.slots))
	for i, s := range e.opt.slots {
		out[i] = s
	}
	return out
}

// SetHaltOnNonFinite makes a skipped (non-finite) update latch: every later
// update is skipped too, until ResetUpdateStatus. A trainer that learns of
// the bad step only a step later keeps the parameters as they were before
// it.
func (e *Engine) SetHaltOnNonFinite(on bool) { e.opt.halt = on }

// StatusTensor is the update status in device memory: float32 words
// indexed by cudalib.StatusSkipped, StatusScale, StatusNorm, StatusHalted.
// Copy it out without waiting with Pipeline.Release.
func (e *Engine) StatusTensor() compute.Tensor { return e.status }

// UpdateStatus reads the status of the last update (waits for the device):
// whether it was skipped, the clip factor it applied and the gradient norm.
func (e *Engine) UpdateStatus() (skipped bool, scale float32, norm float32, err error) {
	var w [cudalib.StatusWords]float32
	if e.capture.active {
		return false, 0, 0, fmt.Errorf("cuda: UpdateStatus while capturing a CUDA graph")
	}
	e.ReadTensor(w[:], e.status)
	return w[cudalib.StatusSkipped] != 0, w[cudalib.StatusScale], w[cudalib.StatusNorm], nil
}

// ResetUpdateStatus zeroes the status words, clearing a halt.
func (e *Engine) ResetUpdateStatus() error {
	e.fail("ResetUpdateStatus", e.dev.ResetStatus())
	return e.err
}
