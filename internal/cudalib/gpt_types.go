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
