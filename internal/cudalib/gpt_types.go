package cudalib

import "fmt"

// GPTStatus is a status of the GPT kernels (SDG_OK, SDG_ERR_* of
// cuda/symddp_gpt.h), which are numbered apart from the runtime's SD_ERR_*.
type GPTStatus int32

// GPT statuses.
const (
	GPTOK      GPTStatus = 0
	GPTErrArg  GPTStatus = 1 // a bad argument (shape, alignment, NULL)
	GPTErrCUDA GPTStatus = 2 // a CUDA call failed (a launch, an attribute)
	GPTErrBLAS GPTStatus = 3 // a cuBLASLt call failed or found no algorithm
)

func (s GPTStatus) String() string {
	switch s {
	case GPTOK:
		return "SDG_OK"
	case GPTErrArg:
		return "SDG_ERR_ARG"
	case GPTErrCUDA:
		return "SDG_ERR_CUDA"
	case GPTErrBLAS:
		return "SDG_ERR_BLAS"
	}
	return fmt.Sprintf("SDG status %d", int32(s))
}

// GPTError is a failed GPT launch: the entry point, its status and
// sdg_last_error()'s message (file:line and the failing call).
type GPTError struct {
	Call string
	Code GPTStatus
	Msg  string
}

func (e *GPTError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("%s: %v", e.Call, e.Code)
	}
	return fmt.Sprintf("%s: %s", e.Call, e.Msg)
}

// Unwrap gives ErrArgument for SDG_ERR_ARG (nil for the others).
func (e *GPTError) Unwrap() error {
	if e.Code == GPTErrArg {
		return ErrArgument
	}
	return nil
}

// GPTEpilogue is what a planned GPT GEMM does after the product (SDG_EPI_*).
type GPTEpilogue int32

// GPT GEMM epilogues; see cuda/symddp_gpt.h.
const (
	GPTEpiNone        GPTEpilogue = 0 // C = AB
	GPTEpiBias        GPTEpilogue = 1 // C = AB + bias
	GPTEpiGELUBias    GPTEpilogue = 2 // C = gelu(AB + bias)
	GPTEpiGELUAuxBias GPTEpilogue = 3 // C = gelu(AB + bias), aux = AB + bias
	GPTEpiDGELU       GPTEpilogue = 4 // C = (AB) * gelu'(aux)
	GPTEpiDGELUBGrad  GPTEpilogue = 5 // as DGELU, bias = column sums of C
	GPTEpiBGradA      GPTEpilogue = 6 // bias (m) = row sums of op(A)
)

// GPTDType is the element type of a GPT GEMM's C or bias (SDG_BF16, SDG_F32).
type GPTDType int32

// GPT element types.
const (
	GPTBF16 GPTDType = 0
	GPTF32  GPTDType = 1
)

// GemmDesc describes a bf16 GEMM to plan (sdg_gemm_desc): row-major C (m,n)
// = op(A) (m,k) op(B) (k,n), fp32 accumulation.
type GemmDesc struct {
	M, N, K int
	// TransA: A is stored (k,m); TransB: B is stored (n,k).
	TransA, TransB bool
	// Batch > 1: strided batches, strides in elements; epilogue none only.
	Batch                     int
	StrideA, StrideB, StrideC int
	CType, BiasType           GPTDType
	Epilogue                  GPTEpilogue
	// Accumulate: C += op(A) op(B).
	Accumulate bool
	// WorkspaceBytes is what every GemmRun with the plan will be given.
	WorkspaceBytes int
}
