package cudalib

import "fmt"

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

// Epilogue is what a planned GEMM does after the product (SDC_EPI_* of
// cuda/symddp_compute.h), in the row-major terms of Gemm: P (m,n) =
// op(a) op(b).
type Epilogue int32

// Epilogues.
const (
	EpiNone        Epilogue = 0 // c = P
	EpiBias        Epilogue = 1 // c = P + bias[col]
	EpiBiasReLU    Epilogue = 2 // c = relu(P + bias[col])
	EpiBiasReLUAux Epilogue = 3 // c = relu(P + bias[col]), its ReLU mask into Aux
	EpiDReLUBGrad  Epilogue = 4 // c = P masked by Aux; bias[col] = column sums of c
	EpiBGradA      Epilogue = 5 // c = P; bias (m) = row sums of op(a)
)

// LtArgs describe a GEMM with a fused epilogue to plan (sdc_lt_args).
type LtArgs struct {
	Epilogue       Epilogue
	TransA, TransB bool
	M, N, K        int
	LDA, LDB, LDC  int
	// Bias is the bias (read) or bias gradient (written) of the epilogue.
	Bias uintptr
	// Aux is the ReLU bit-mask, AuxLD its bits per column (a multiple of
	// 128, at least N): AuxLD/8*M bytes.
	Aux   uintptr
	AuxLD int
	// AlignA, AlignB, AlignC are the alignments in bytes (powers of two up
	// to 256) that the operands of every LtMatmul with the plan will have.
	AlignA, AlignB, AlignC int
}

// BF16Epilogue is what a planned bf16 GEMM does after the product
// (SDC_BEPI_*).
type BF16Epilogue int32

// bf16 GEMM epilogues; see cuda/symddp_compute.h.
const (
	BF16EpiNone        BF16Epilogue = 0 // C = AB
	BF16EpiBias        BF16Epilogue = 1 // C = AB + bias
	BF16EpiGELUBias    BF16Epilogue = 2 // C = gelu(AB + bias)
	BF16EpiGELUAuxBias BF16Epilogue = 3 // C = gelu(AB + bias), aux = AB + bias
	BF16EpiDGELU       BF16Epilogue = 4 // C = (AB) * gelu'(aux)
	BF16EpiDGELUBGrad  BF16Epilogue = 5 // as DGELU, bias = column sums of C
	BF16EpiBGradA      BF16Epilogue = 6 // bias (m) = row sums of op(A)
)

// GemmDesc describes a bf16 GEMM to plan (sdc_bf16_gemm_desc): row-major C (m,n)
// = op(A) (m,k) op(B) (k,n), fp32 accumulation.
type GemmDesc struct {
	M, N, K int
	// TransA: A is stored (k,m); TransB: B is stored (n,k).
	TransA, TransB bool
	// Batch > 1: strided batches, strides in elements; epilogue none only.
	Batch                     int
	StrideA, StrideB, StrideC int
	CType, BiasType           DType // Float32 or BFloat16
	Epilogue                  BF16Epilogue
	// Accumulate: C += op(A) op(B).
	Accumulate bool
	// WorkspaceBytes is what every BF16GemmRun with the plan will be given.
	WorkspaceBytes int
}

// AttentionImpl is the kernels a bf16 attention call runs (SDC_ATTN_* of
// cuda/symddp_compute.h).
type AttentionImpl int32

// bf16 attention kernels.
const (
	// AttentionAuto: cuDNN's where its plans build at the shape (unless
	// SYMDDP_ATTENTION=own), else the mma kernels where they apply, else
	// the wmma ones; grouped-query attention never takes cuDNN's.
	AttentionAuto  AttentionImpl = 0
	AttentionWMMA  AttentionImpl = 1 // nvcuda::wmma; head size 32 or 64, T a multiple of 64
	AttentionMMA   AttentionImpl = 2 // mma.sync; head size 64, T a multiple of 128
	AttentionCUDNN AttentionImpl = 3 // cuDNN's fused attention, where the library was built with it
)

func (a AttentionImpl) String() string {
	switch a {
	case AttentionAuto:
		return "auto"
	case AttentionWMMA:
		return "wmma"
	case AttentionMMA:
		return "mma"
	case AttentionCUDNN:
		return "cudnn"
	}
	return fmt.Sprintf("AttentionImpl(%d)", int32(a))
}

// AttentionF32ScratchFloats is the scratch of sdc_attention_backward_f32
// at B sequences of T positions and NH query heads, in floats: each row's
// rowsum(dout·out), B·NH·T rounded up to a multiple of 4, then the dS of
// every causal 64×64 tile, B·NH·nb(nb+1)/2 tiles of 4096 with nb =
// ceil(T/64) (cuda/symddp_compute.h).
func AttentionF32ScratchFloats(b, nh, t int) int {
	nb := (t + 63) / 64
	return (b*nh*t+3)&^3 + b*nh*nb*(nb+1)/2*4096
}
