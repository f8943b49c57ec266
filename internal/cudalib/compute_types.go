package cudalib

// ComputeABIVersion is the compute C ABI this package speaks
// (SDC_ABI_VERSION of cuda/symddp_compute.h).
const ComputeABIVersion = 1

// Activation is a fused activation (SDC_IDENTITY, SDC_RELU): the numbers of
// compute.Activation.
type Activation int32

// Activations.
const (
	Identity Activation = 0
	ReLU     Activation = 1
)

// OptimKind is an optimizer's update kernel (SDC_SGD, SDC_ADAM, SDC_ADAMW).
type OptimKind int32

// Optimizer kinds.
const (
	SGD   OptimKind = 1
	Adam  OptimKind = 2
	AdamW OptimKind = 3
)

// Words of the update status (SDC_STATUS_*): device float32s that every
// update writes.
const (
	StatusSkipped = 0 // 1: the update was skipped (non-finite gradients or a halt)
	StatusScale   = 1 // the clip factor applied (1: not clipped)
	StatusNorm    = 2 // the global gradient norm, as float32
	StatusHalted  = 3 // 1: halted after a non-finite step; later updates skip
	StatusWords   = 4
)

// StepValues are the values of one training step that change from step to
// step (sdc_step). Kernels take them by value when run eagerly and read them
// from the context's step block when recorded into a CUDA graph.
type StepValues struct {
	// LossScale scales the softmax cross-entropy gradient.
	LossScale float32
	// LR, StepSize, BC2Sqrt and Decay are optim.StepScalars.
	LR, StepSize, BC2Sqrt, Decay float32
	// First is optimizer step 1: the state starts from zero.
	First bool
}

// OptimArgs are an optimizer's fixed hyperparameters (sdc_optim).
type OptimArgs struct {
	Kind     OptimKind
	Nesterov bool
	Momentum float32
	// WeightDecay is the L2 term of SGD and Adam; 0 for AdamW, whose
	// decoupled decay travels in StepValues.Decay.
	WeightDecay  float32
	Beta1, Beta2 float32
	Eps          float32
	// C1 and C2 are 1-Beta1 and 1-Beta2 computed in float32.
	C1, C2 float32
	// MaxNorm > 0 clips the global gradient norm to it.
	MaxNorm float32
	// HaltOnSkip makes every update after a skipped one skip too.
	HaltOnSkip bool
}

// ContextInfo describes a compute context.
type ContextInfo struct {
	Stream     uintptr // the compute stream (cudaStream_t)
	CopyStream uintptr // the stream batches are copied on
	Status     uintptr // device float32[StatusWords]
	Device     int
	SMCount    int
	OwnsStream bool
}
