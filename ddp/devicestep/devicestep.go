// Package devicestep is the contract between the trainer (package ddp) and
// engines that run a whole training step on a device (compute/cuda): the
// step's batches staged through pinned memory, the optimizer applied in
// device memory (whole arena or one shard of it), and the step recorded
// once into a graph and replayed. The trainer reaches such an engine through
// these interfaces alone, so it depends on no engine; package compute, the
// operations that layers are made of, knows nothing of optimizers or steps.
package devicestep

import (
	"errors"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/optim"
)

// Engine is offered by engines that keep the arenas in device memory
// and can run a whole training step there (compute/cuda): batches staged
// into pinned memory and copied while the previous step computes, the
// optimizer on the device, and the step's work recorded once into a graph
// and replayed. The trainer (package ddp) uses it through this interface
// alone, so it depends on no engine.
type Engine interface {
	compute.Engine
	// Update clips grads to a global norm of clipNorm (0: no clipping) and
	// applies step number step of o, with learning rate lr, to params,
	// keeping the optimizer's state in device memory.
	Update(o optim.Optimizer, params, grads compute.Tensor, step int, lr float32, clipNorm float32) error
	// StepGraphs reports whether steps may be recorded into graphs (the
	// engine's setting).
	StepGraphs() bool
	// Notice logs one line about how the engine runs.
	Notice(msg string)
	// Err is the first failure of an enqueued operation, if any.
	Err() error
	// NewStepPipeline allocates two batch slots that hold what s
	// describes, and a report of the given tensors copied out after every
	// step.
	NewStepPipeline(s SlotSpec, report ...compute.Tensor) (Pipeline, error)
	// SetHaltOnNonFinite makes a non-finite step latch a halt that turns
	// every later update into a no-op.
	SetHaltOnNonFinite(on bool)
	// StatusTensor is the update's status words (device memory), and
	// StatusSkipped the index of the word that says a step was skipped.
	StatusTensor() compute.Tensor
	StatusSkipped() int
	// ResetUpdateStatus clears the status and the halt.
	ResetUpdateStatus() error
	// BeginCapture starts recording the engine's work into a graph;
	// EndStepCapture ends it and returns the graph.
	BeginCapture() error
	EndStepCapture() (Graph, error)
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

// ParamsWatcher is offered by device engines that keep derived copies of
// the parameters which their Update refreshes (compute/cuda: a bf16 model's
// copy of its weights, written by the update, so that the next forward need
// not cast): ddp calls ParamsWritten after it writes the parameter arena
// other than through Update (initialisation, a broadcast, a checkpoint
// loaded), so that the next forward casts again.
type ParamsWatcher interface {
	ParamsWritten()
}

// ShardedUpdater is offered by device engines that can apply the optimizer
// to one shard of the arena (the sharded update, ZeRO-1, on the GPU): each
// PE sums the squares of its shard of the reduced gradient (SumSquaresInto),
// the PEs exchange those sums, and UpdateShard applies the step to the shard
// with the verdict (skip, clip) of their sum, so that every PE decides alike.
type ShardedUpdater interface {
	// SumSquaresInto enqueues the float64 sum of the squares of x into dst
	// (two float32 words of device memory holding the float64's bits).
	SumSquaresInto(dst, x compute.Tensor)
	// UpdateShard is Engine.Update over params and grads, this PE's
	// shard of elements [off, off+len) of the arena (off counts from the
	// arena's start: the weight-decay exemptions of SetDecayExempt apply at
	// off), with the optimizer state kept for the shard only, and the
	// gradient check taken from partials: nparts float64 values at float32
	// word offsets 0, stride, 2*stride, ... of partials, summed in that order.
	UpdateShard(o optim.Optimizer, params, grads compute.Tensor, off int, partials compute.Tensor, nparts, stride int, step int, lr, clipNorm float32) error
}

// Pipeline stages batches for Engine: slot i is filled on the
// host, submitted (copied to the device), consumed by a step, released and
// its report read.
type Pipeline interface {
	Slot(i int) *Slot
	Fill(i int) error
	Submit(i int) error
	// StoreReport enqueues the step's own copy of the report into slot
	// i, as the step's last work (it may be captured in the step's
	// graph); without it Release copies the report.
	StoreReport(i int) error
	Release(i int) error
	Report(i int) ([]float32, error)
	Close() error
}

// SlotSpec is what one batch slot of a Pipeline holds: Rows rows of
// inputs of shape Sample, float32 values or int32 token ids, Targets labels
// per row and Extra float32 words.
type SlotSpec struct {
	Rows   int
	Sample []int
	// Tokens says the inputs are token ids (Slot.Tokens, Rows·Sample
	// elements) instead of float values (Slot.X, (Rows, Sample...)).
	Tokens bool
	// Targets is the number of labels of a row: 1 (a class label, the
	// default when 0) or one per position of a token window.
	Targets int
	Extra   int
}

// Slot is one batch slot of a Pipeline.
type Slot struct {
	// The device tensors a step reads: the inputs, X (Rows, Sample...) for
	// float inputs or Tokens (Rows·Sample) for token ids, the other nil;
	// the labels Y (Rows·Targets); Extra (Extra words, nil when none).
	X      compute.Tensor
	Tokens compute.Labels
	Y      compute.Labels
	Extra  compute.Tensor
	// Pinned host memory for the next batch, laid out like the tensors
	// above (HostX or HostTokens, the other nil).
	HostX      []float32
	HostTokens []int32
	HostY      []int32
	HostExtra  []float32
}

// ErrLossScale is returned (wrapped) by Graph.Launch when the recorded
// step holds its loss scale as a constant (a fused model's classifier) and
// the launch brings another: the step must run eagerly (a batch with
// another number of targets, such as an epoch's last).
var ErrLossScale = errors.New("the recorded step holds another loss scale")

// Graph is a recorded step: Launch replays it with one step's values.
type Graph interface {
	Launch(v Values) error
	Close() error
}

// Values are the values one launch of a recorded step brings.
type Values struct {
	// LossScale is the loss's scale: 1 / targets of the global batch.
	LossScale float32
	// Step is the optimizer step number (1, 2, ...); LR its learning rate.
	Step int
	LR   float32
}

// BF16Caster is offered by device engines that convert between float32
// tensors and bf16 values in device memory, for a gradient allreduce in
// bf16 (ddp.Options.GradDType): round to nearest even one way, exact the
// other. dst and src address len(tensor) bf16 values (2 bytes each).
type BF16Caster interface {
	CastToBF16(dst uintptr, src compute.Tensor)
	CastFromBF16(dst compute.Tensor, src uintptr)
}
