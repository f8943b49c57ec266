package cuda

import (
	"time"
	"unsafe"

	"github.com/symddp/symddp/internal/cudalib"
)

// device is what the engine needs of a compute context of the library: one
// method per C entry point (see cuda/symddp_compute.h). *cudalib.Context is
// the real one; tests may stand in a host implementation.
type device interface {
	Info() cudalib.ContextInfo
	DeviceName() (string, error)
	Close() error

	DevAlloc(bytes int) (uintptr, error)
	DevFree(p uintptr) error
	HostAlloc(bytes int) (unsafe.Pointer, error)
	HostFree(p unsafe.Pointer) error
	Zero(dst uintptr, bytes int) error
	Copy(dst, src uintptr, bytes int) error
	HtoD(onCopyStream bool, dst uintptr, src unsafe.Pointer, bytes int) error
	DtoH(onCopyStream bool, dst unsafe.Pointer, src uintptr, bytes int) error

	EventCreate() (uint64, error)
	EventDestroy(ev uint64) error
	EventRecord(onCopyStream bool, ev uint64) error
	WaitEvent(onCopyStream bool, ev uint64) error
	EventSync(ev uint64, timeout time.Duration) error
	Sync(timeout time.Duration) error

	Gemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) error
	BiasAct(y uintptr, rows, cols int, bias uintptr, act cudalib.Activation) error
	BiasActBackward(dy, y uintptr, rows, cols int, dbias uintptr, act cudalib.Activation, accumulate bool) error
	SoftmaxXent(logits, labels uintptr, rows, classes int, dlogits uintptr, scale float32, useBlock bool, stats uintptr) error
	Accumulate(dst, src uintptr, n int) error
	Scale(x uintptr, s float32, n int) error
	SumSquares(x uintptr, n int, timeout time.Duration) (float64, error)
	Update(o cudalib.OptimArgs, v cudalib.StepValues, useBlock bool, params, grads, state0, state1 uintptr, n int) error
	ResetStatus() error

	SetStep(v cudalib.StepValues) error
	CaptureBegin() error
	CaptureEnd() (uint64, error)
	Capturing() (bool, error)
	GraphLaunch(exec uint64, v cudalib.StepValues) error
	GraphDestroy(exec uint64) error

	LtPlan(a cudalib.LtArgs) (uint64, error)
	LtPlanDestroy(plan uint64) error
	LtMatmul(plan uint64, a, b, c uintptr, side bool) error
	SideFork() error
	SideJoin() error
}

var _ device = (*cudalib.Context)(nil)
