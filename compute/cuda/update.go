package cuda

import (
	"fmt"
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
	p, g := e.tensorOf("Update", params), e.tensorOf("Update", grads)
	if p.size != g.size {
		return fmt.Errorf("cuda: Update: %d gradients for %d parameters", g.size, p.size)
	}
	if step < 1 {
		return fmt.Errorf("cuda: Update: step %d, steps count from 1", step)
	}
	if !(lr >= 0) || math.IsInf(float64(lr), 1) {
		return fmt.Errorf("cuda: Update: learning rate %g", lr)
	}
	if !(clipNorm >= 0) {
		return fmt.Errorf("cuda: Update: clip norm %g", clipNorm)
	}
	h := o.Hyper()
	args, err := optimArgs(h, clipNorm)
	if err != nil {
		return err
	}
	slots, err := e.stateFor(o, p.size)
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
	block := e.capture.active
	if block {
		e.capture.hyper = h
		e.capture.updates++
	}
	var ex uintptr
	if e.exempt != nil {
		if e.exemptN != p.size {
			return fmt.Errorf("cuda: Update of %d elements, the weight-decay exemptions (SetDecayExempt) are for %d", p.size, e.exemptN)
		}
		ex = e.exempt.ptr
	}
	e.fail("Update", e.dev.Update(args, stepValues(h, step, lr), block, p.ptr, g.ptr, s0, s1, ex, p.size))
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
// it on first use.
func (e *Engine) stateFor(o optim.Optimizer, n int) ([]*Tensor, error) {
	u := &e.opt
	if u.kind != "" {
		if u.kind != o.Name() || u.n != n || len(u.slots) != o.Slots() {
			return nil, fmt.Errorf("cuda: Update: the engine keeps state for %s over %d parameters (%d slots), not %s over %d (%d slots)",
				u.kind, u.n, len(u.slots), o.Name(), n, o.Slots())
		}
		return u.slots, nil
	}
	if e.capture.active {
		return nil, fmt.Errorf("cuda: Update: the first update allocates the optimizer state and cannot be captured")
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
	if _, err := e.stateFor(o, n); err != nil {
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
