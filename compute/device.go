package compute

import (
	"errors"
	"fmt"

	"github.com/symddp/symddp/optim"
)

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
	// NewStepPipeline allocates two batch slots that hold what s
	// describes, and a report of the given tensors copied out after every
	// step.
	NewStepPipeline(s SlotSpec, report ...Tensor) (StepPipeline, error)
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

// DeviceRows is offered by device engines that can keep a dataset's
// samples in device memory and gather each batch there by index
// (compute/cuda), so that a step copies indices instead of samples.
type DeviceRows interface {
	// UploadRows copies rows of cols values to the device: x (floats), or
	// b (bytes) whose values are table[byte]. An upload of the same arrays
	// again returns the rows already there.
	UploadRows(x []float32, b []byte, table *[256]float32, cols int) (ResidentRows, error)
	// GatherResident writes rows idx of r into dst (len(idx) rows of r's
	// cols); an index of -1 gives a row of zeros. It can be recorded in a
	// graph: idx is read on the device when the step runs.
	GatherResident(dst Tensor, r ResidentRows, idx Labels)
}

// ResidentRows are a dataset's rows in device memory (DeviceRows).
type ResidentRows interface {
	// Rows and Cols are the array's shape; Bytes the device memory it takes.
	Rows() int
	Cols() int
	Bytes() int64
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

// ShardedUpdater is offered by device engines that can apply the optimizer
// to one shard of the arena (the sharded update, ZeRO-1, on the GPU): each
// PE sums the squares of its shard of the reduced gradient (SumSquaresInto),
// the PEs exchange those sums, and UpdateShard applies the step to the shard
// with the verdict (skip, clip) of their sum, so that every PE decides alike.
type ShardedUpdater interface {
	// SumSquaresInto enqueues the float64 sum of the squares of x into dst
	// (two float32 words of device memory holding the float64's bits).
	SumSquaresInto(dst, x Tensor)
	// UpdateShard is DeviceSteps.Update over params and grads, this PE's
	// shard of elements [off, off+len) of the arena (off counts from the
	// arena's start: the weight-decay exemptions of SetDecayExempt apply at
	// off), with the optimizer state kept for the shard only, and the
	// gradient check taken from partials: nparts float64 values at float32
	// word offsets 0, stride, 2*stride, ... of partials, summed in that order.
	UpdateShard(o optim.Optimizer, params, grads Tensor, off int, partials Tensor, nparts, stride int, step int, lr, clipNorm float32) error
}

// StepPipeline stages batches for DeviceSteps: slot i is filled on the
// host, submitted (copied to the device), consumed by a step, released and
// its report read.
type StepPipeline interface {
	Slot(i int) *StepSlot
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

// SlotSpec is what one batch slot of a StepPipeline holds: Rows rows of
// inputs of shape Sample, float32 values or int32 token ids, Targets labels
// per row and Extra float32 words.
type SlotSpec struct {
	Rows   int
	Sample []int
	// Tokens says the inputs are token ids (StepSlot.Tokens, Rows·Sample
	// elements) instead of float values (StepSlot.X, (Rows, Sample...)).
	Tokens bool
	// Targets is the number of labels of a row: 1 (a class label, the
	// default when 0) or one per position of a token window.
	Targets int
	Extra   int
}

// StepSlot is one batch slot of a StepPipeline.
type StepSlot struct {
	// The device tensors a step reads: the inputs, X (Rows, Sample...) for
	// float inputs or Tokens (Rows·Sample) for token ids, the other nil;
	// the labels Y (Rows·Targets); Extra (Extra words, nil when none).
	X      Tensor
	Tokens Labels
	Y      Labels
	Extra  Tensor
	// Pinned host memory for the next batch, laid out like the tensors
	// above (HostX or HostTokens, the other nil).
	HostX      []float32
	HostTokens []int32
	HostY      []int32
	HostExtra  []float32
}

// ErrDeviceMemory is what a device engine's build-time allocations give when
// the device has no room left: wrapped in the error of a build that returns
// one (a fused model's), and in the *DeviceMemoryError that Alloc, which
// returns no error, panics with. RecoverDeviceMemory turns that panic into
// an error: ddp's New (the model's build) and Fit (the GPU step path's
// buffers) and models.NewSampler do.
var ErrDeviceMemory = errors.New("out of device memory")

// DeviceMemoryError is the panic value of a device engine's Alloc (or
// AllocLabels) that the device refused for lack of memory.
type DeviceMemoryError struct {
	Engine string // the engine's name
	Op     string // what allocated
	Bytes  int64  // what it asked for
	Err    error  // the device's error
}

func (e *DeviceMemoryError) Error() string {
	return fmt.Sprintf("%s: %s: %d bytes: %v: %v", e.Engine, e.Op, e.Bytes, ErrDeviceMemory, e.Err)
}

// Unwrap gives ErrDeviceMemory and the device's error.
func (e *DeviceMemoryError) Unwrap() []error { return []error{ErrDeviceMemory, e.Err} }

// RecoverDeviceMemory turns r, what a deferred recover() returned, into
// *err ("what: " and the *DeviceMemoryError) when it is a device engine's
// refusal to allocate for lack of memory; any other panic goes on. Use it
// where a build that allocates with Alloc returns an error:
//
//	defer func() { compute.RecoverDeviceMemory(recover(), &err, "build") }()
func RecoverDeviceMemory(r any, err *error, what string) {
	if r == nil {
		return
	}
	dm, ok := r.(*DeviceMemoryError)
	if !ok {
		panic(r)
	}
	*err = fmt.Errorf("%s: %w", what, dm)
}

// ErrStepScale is returned (wrapped) by StepGraph.Launch when the recorded
// step holds its loss scale as a constant (a fused model's classifier) and
// the launch brings another: the step must run eagerly (a batch with
// another number of targets, such as an epoch's last).
var ErrStepScale = errors.New("the recorded step holds another loss scale")

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

// BF16Caster is offered by device engines that convert between float32
// tensors and bf16 values in device memory, for a gradient allreduce in
// bf16 (ddp.Options.GradDType): round to nearest even one way, exact the
// other. dst and src address len(tensor) bf16 values (2 bytes each).
type BF16Caster interface {
	CastToBF16(dst uintptr, src Tensor)
	CastFromBF16(dst Tensor, src uintptr)
}
