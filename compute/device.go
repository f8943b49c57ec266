package compute

import "github.com/symddp/symddp/optim"

// DeviceSteps is offered by engines that keep the arenas in device memory
// and can run a whole training step there (compute/cuda): batches staged
// into pinned memory and copied while the previous step computes, the
// optimizer on the device, and the step's work recorded once into a graph
// and replayed. The trainer (package ddp) uses it through this interface
// alone, so it depends on no engine.
type DeviceSteps interface {
	Engine
	// Update clips grads to a global norm of clipNorm (0: no clipping) and
	// applies step number step of o, with learning rate lr, to params,
	// keeping the optimizer's state in device memory.
	Update(o optim.Optimizer, params, grads Tensor, step int, lr float32, clipNorm float32) error
	// StepGraphs reports whether steps may be recorded into graphs (the
	// engine's setting).
	StepGraphs() bool
	// Notice logs one line about how the engine runs.
	Notice(msg string)
	// Err is the first failure of an enqueued operation, if any.
	Err() error
	// NewStepPipeline allocates two batch slots for float inputs of shape
	// sample (rows first), rows labels and extra float32 words, and a
	// report of the given tensors copied out after every step.
	NewStepPipeline(sample []int, extra int, report ...Tensor) (StepPipeline, error)
	// SetHaltOnNonFinite makes a non-finite step latch a halt that turns
	// every later update into a no-op.
	SetHaltOnNonFinite(on bool)
	// StatusTensor is the update's status words (device memory), and
	// StatusSkipped the index of the word that says a step was skipped.
	StatusTensor() Tensor
	StatusSkipped() int
	// ResetUpdateStatus clears the status and the halt.
	ResetUpdateStatus() error
	// BeginCapture starts recording the engine's work into a graph;
	// EndStepCapture ends it and returns the graph.
	BeginCapture() error
	EndStepCapture() (StepGraph, error)
}

// DecayExempter is offered by device engines whose Update can leave some
// elements of the arena without weight decay (compute/cuda): ddp gives it
// the spans of the parameters a model exempts (ParamSpec.NoDecay).
type DecayExempter interface {
	// SetDecayExempt makes later Updates of an arena of n elements apply
	// the optimizer without weight decay to the elements of spans
	// ([lo, hi) pairs).
	SetDecayExempt(n int, spans [][2]int) error
}

// StepPipeline stages batches for DeviceSteps: slot i is filled on the
// host, submitted (copied to the device), consumed by a step, released and
// its report read.
type StepPipeline interface {
	Slot(i int) *StepSlot
	Fill(i int) error
	Submit(i int) error
	Release(i int) error
	Report(i int) ([]float32, error)
	Close() error
}

// StepSlot is one batch slot of a StepPipeline.
type StepSlot struct {
	// X (rows, sample...), Y (rows) and Extra (extra words, nil when none)
	// are the device tensors a step reads.
	X     Tensor
	Y     Labels
	Extra Tensor
	// HostX, HostY and HostExtra are pinned host memory for the next batch.
	HostX     []float32
	HostY     []int32
	HostExtra []float32
}

// StepGraph is a recorded step: Launch replays it with one step's values.
type StepGraph interface {
	Launch(v StepValues) error
	Close() error
}

// StepValues are the values one launch of a recorded step brings.
type StepValues struct {
	// LossScale is the loss's scale: 1 / targets of the global batch.
	LossScale float32
	// Step is the optimizer step number (1, 2, ...); LR its learning rate.
	Step int
	LR   float32
}
