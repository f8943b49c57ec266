// Package optim holds symddp's optimizers, learning-rate schedules and
// gradient clipping. Each optimizer is one fused loop over the flat parameter,
// gradient and state slices of the arenas: every PE runs the same update on
// the same reduced gradients, so replicas stay bitwise identical.
//
// # Choosing an optimizer
//
// A program picks an optimizer by name, as the train command does, with
// [New]("sgd"|"adam"|"adamw", cfg), starting from [DefaultConfig] (PyTorch's
// defaults) and overriding what it wants; or builds one directly with
// [NewSGD], [NewAdam] or [NewAdamW] and their typed configurations. It hands
// the [Optimizer] to ddp.New, which owns its state and calls [Optimizer.Update]
// once per step over the whole arena (or over runs of it, when a model
// exempts some parameters from weight decay: ParamSpec.NoDecay).
//
// The learning rate comes from ddp.Options.LR, or from a [Schedule]:
// [NewSchedule]("constant"|"step"|"cosine", cfg) with an optional linear
// warmup, or [NewConstant], [NewStepDecay], [NewCosine] and [NewWarmup]
// composed by hand. Gradient clipping by global norm ([ClipGlobalNorm]) is
// ddp.Options.ClipNorm.
//
// # Bit-exact updates
//
// The optimizers follow torch.optim (SGD, Adam, AdamW). Their doc comments
// give the update as a sequence of float32 operations, each rounded to
// nearest and none fused into a multiply-add; the per-step constants are
// computed once in float64 ([Hyper.StepScalars]). A device kernel that performs
// the same operations in the same order (CUDA: __fmul_rn and __fadd_rn or
// -fmad=false, IEEE division and square root, no flush to zero, so no
// --use_fast_math) reproduces the CPU result bit for bit.
//
// The state vectors (momentum, Adam moments) are owned by the caller: the
// trainer lays them out like the parameter arena and saves them in checkpoints
// under the names of [Optimizer.StateNames], together with the step counter,
// which the trainer owns too. Optimizers themselves hold only their
// hyperparameters, so they are safe for concurrent use.
package optim

import (
	"fmt"
	"math"
)

// Config holds the hyperparameters of every optimizer, flat, as the command
// line sets them. Each optimizer reads the fields it uses and ignores the
// others. [DefaultConfig] gives PyTorch's defaults for an optimizer.
type Config struct {
	// Momentum μ ≥ 0 (SGD). 0 turns momentum off.
	Momentum float32
	// Nesterov uses Nesterov momentum (SGD); it needs Momentum > 0.
	Nesterov bool
	// WeightDecay ≥ 0 is L2 added to the gradient (SGD, Adam) or
	// decoupled decay of the parameters (AdamW).
	WeightDecay float32
	// Beta1 and Beta2 in [0, 1) are the decay rates of Adam's first and
	// second moment estimates (Adam, AdamW).
	Beta1, Beta2 float32
	// Eps > 0 is added to the denominator (Adam, AdamW).
	Eps float32
}

// Hyper is an optimizer's hyperparameters, in a form device engines can
// run their own fused kernels from: the kernel of Kind, with the fields of
// Config it uses, and the per-step constants of [Hyper.StepScalars]. The
// update each kind performs is specified in the doc comments of [SGD],
// [Adam] and [AdamW]. New(h.Kind, h.Config) builds the same optimizer again.
type Hyper struct {
	// Kind is "sgd", "adam" or "adamw".
	Kind string
	// Config holds the hyperparameters; fields Kind does not use are 0.
	Config
}

// StepScalars are the constants of one update step, computed on the host
// once per step: in float64 from the float32 hyperparameters, then rounded
// to float32. Device kernels take them as arguments.
type StepScalars struct {
	// LR is the step's learning rate.
	LR float32
	// StepSize = float32(lr / (1 − β1^t)) (Adam, AdamW; 0 otherwise).
	StepSize float32
	// BC2Sqrt = float32(sqrt(1 − β2^t)) (Adam, AdamW; 0 otherwise).
	BC2Sqrt float32
	// Decay = float32(1 − lr·wd) (AdamW; 1 otherwise).
	Decay float32
}

// StepScalars returns the constants of update step step (1, 2, ...) with
// learning rate lr.
func (h Hyper) StepScalars(step int, lr float32) StepScalars {
	s := StepScalars{LR: lr, Decay: 1}
	if h.Kind != "adam" && h.Kind != "adamw" {
		return s
	}
	t := float64(step)
	bc1 := 1 - math.Pow(float64(h.Beta1), t)
	bc2 := 1 - math.Pow(float64(h.Beta2), t)
	s.StepSize = float32(float64(lr) / bc1)
	s.BC2Sqrt = float32(math.Sqrt(bc2))
	if h.Kind == "adamw" {
		s.Decay = float32(1 - float64(lr)*float64(h.WeightDecay))
	}
	return s
}

// Optimizer updates parameters in place from their gradients.
//
// Update is elementwise: calling it on disjoint sub-ranges of the slices
// (buckets, or goroutines sharing the work) gives the same bits as one call
// over the whole arena.
type Optimizer interface {
	// Name is the registry name ("sgd", "adam", "adamw").
	Name() string
	// Slots is the number of state vectors, each as long as the parameters
	// (0 for plain SGD, 1 with momentum, 2 for Adam); len(StateNames()).
	Slots() int
	// StateNames names the state vectors for checkpoints, in the order
	// Update takes them (["momentum"], ["exp_avg", "exp_avg_sq"]).
	StateNames() []string
	// Update applies step number step (1, 2, ...) with learning rate lr ≥ 0
	// to params from grads; state holds Slots() slices of len(params). At
	// step 1 the state's previous contents are ignored (PyTorch's lazily
	// created state). It is one pass over the slices and does not allocate.
	// It panics on mismatched lengths, step < 1 or an lr that is negative, NaN or infinite.
	Update(params, grads []float32, state [][]float32, step int, lr float32)
	// Hyper returns the hyperparameters for device engines.
	Hyper() Hyper
}

// Schedule gives the learning rate of a step (steps count from 1). LR panics
// when step < 1.
type Schedule interface {
	// LR is the learning rate of step step (1, 2, ...).
	LR(step int) float32
}

// Settling is a schedule that can say when its learning rate stops
// changing. The cosine schedule settles at its total + 1 (at its minimum),
// a warmup at its steps + those of the schedule after it. Fit reads it to
// warn of the steps of a run that the schedule would leave at a learning
// rate of 0.
type Settling interface {
	Schedule
	// Settled is the first step from which the learning rate stays
	// LR(Settled()), or 0 when it keeps changing.
	Settled() int
}

// checkUpdate panics unless Update's arguments fit an optimizer with slots
// state vectors.
func checkUpdate(name string, slots int, params, grads []float32, state [][]float32, step int, lr float32) {
	if len(grads) != len(params) {
		panic(fmt.Sprintf("optim: %s: %d grads for %d params", name, len(grads), len(params)))
	}
	if len(state) != slots {
		panic(fmt.Sprintf("optim: %s: %d state slices, want %d", name, len(state), slots))
	}
	for i, s := range state {
		if len(s) != len(params) {
			panic(fmt.Sprintf("optim: %s: state %d has %d elements for %d params", name, i, len(s), len(params)))
		}
	}
	if step < 1 {
		panic(fmt.Sprintf("optim: %s: step %d, steps count from 1", name, step))
	}
	if !(lr >= 0) || math.IsInf(float64(lr), 1) {
		panic(fmt.Sprintf("optim: %s: learning rate %g", name, lr))
	}
}
