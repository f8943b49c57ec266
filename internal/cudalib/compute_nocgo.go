//go:build !cgo

package cudalib

import (
	"time"
	"unsafe"
)

// Compute stands in for the compute entry points in builds without cgo,
// where OpenCompute always fails and no method is ever called.
type Compute struct{}

// OpenCompute always fails without cgo.
func OpenCompute(l *Lib) (*Compute, error) { return nil, errNoCgo }

// Lib is nil without cgo.
func (cp *Compute) Lib() *Lib { return nil }

// Context stands in for a compute context in builds without cgo.
type Context struct{}

// NewContext fails: the library needs cgo.
func (cp *Compute) NewContext(stream uintptr, device int) (*Context, error) { return nil, errNoCgo }

// Close does nothing without cgo.
func (c *Context) Close() error { return nil }

// Info is empty without cgo.
func (c *Context) Info() ContextInfo { return ContextInfo{} }

// DeviceName fails: the library needs cgo.
func (c *Context) DeviceName() (string, error) { return "", errNoCgo }

// DevAlloc fails: the library needs cgo.
func (c *Context) DevAlloc(bytes int) (uintptr, error) { return 0, errNoCgo }

// DevFree fails: the library needs cgo.
func (c *Context) DevFree(p uintptr) error { return errNoCgo }

// HostAlloc fails: the library needs cgo.
func (c *Context) HostAlloc(bytes int) (unsafe.Pointer, error) { return nil, errNoCgo }

// HostFree fails: the library needs cgo.
func (c *Context) HostFree(p unsafe.Pointer) error { return errNoCgo }

// Zero fails: the library needs cgo.
func (c *Context) Zero(dst uintptr, bytes int) error { return errNoCgo }

// Copy fails: the library needs cgo.
func (c *Context) Copy(dst, src uintptr, bytes int) error { return errNoCgo }

// HtoD fails: the library needs cgo.
func (c *Context) HtoD(onCopyStream bool, dst uintptr, src unsafe.Pointer, bytes int) error {
	return errNoCgo
}

// DtoH fails: the library needs cgo.
func (c *Context) DtoH(onCopyStream bool, dst unsafe.Pointer, src uintptr, bytes int) error {
	return errNoCgo
}

// EventCreate fails: the library needs cgo.
func (c *Context) EventCreate() (uint64, error) { return 0, errNoCgo }

// EventDestroy fails: the library needs cgo.
func (c *Context) EventDestroy(ev uint64) error { return errNoCgo }

// EventRecord fails: the library needs cgo.
func (c *Context) EventRecord(onCopyStream bool, ev uint64) error { return errNoCgo }

// WaitEvent fails: the library needs cgo.
func (c *Context) WaitEvent(onCopyStream bool, ev uint64) error { return errNoCgo }

// EventSync fails: the library needs cgo.
func (c *Context) EventSync(ev uint64, timeout time.Duration) error { return errNoCgo }

// Sync fails: the library needs cgo.
func (c *Context) Sync(timeout time.Duration) error { return errNoCgo }

// Gemm fails: the library needs cgo.
func (c *Context) Gemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, cm uintptr, ldc int) error {
	return errNoCgo
}

// BiasAct fails: the library needs cgo.
func (c *Context) BiasAct(y uintptr, rows, cols int, bias uintptr, act Activation) error {
	return errNoCgo
}

// BiasActBackward fails: the library needs cgo.
func (c *Context) BiasActBackward(dy, y uintptr, rows, cols int, dbias uintptr, act Activation, accumulate bool) error {
	return errNoCgo
}

// SoftmaxXent fails: the library needs cgo.
func (c *Context) SoftmaxXent(logits, labels uintptr, rows, classes int, dlogits uintptr, scale float32, useBlock bool, stats uintptr) error {
	return errNoCgo
}

// Accumulate fails: the library needs cgo.
func (c *Context) Accumulate(dst, src uintptr, n int) error { return errNoCgo }

// Scale fails: the library needs cgo.
func (c *Context) Scale(x uintptr, s float32, n int) error { return errNoCgo }

// SumSquares fails: the library needs cgo.
func (c *Context) SumSquares(x uintptr, n int, timeout time.Duration) (float64, error) {
	return 0, errNoCgo
}

// setStep fails: the library needs cgo.
func (c *Context) setStep(v StepValues) {}

// Update fails: the library needs cgo.
func (c *Context) Update(o OptimArgs, v StepValues, useBlock bool, params, grads, state0, state1 uintptr, n int) error {
	return errNoCgo
}

// ResetStatus fails: the library needs cgo.
func (c *Context) ResetStatus() error { return errNoCgo }

// SetStep fails: the library needs cgo.
func (c *Context) SetStep(v StepValues) error { return errNoCgo }

// CaptureBegin fails: the library needs cgo.
func (c *Context) CaptureBegin() error { return errNoCgo }

// CaptureEnd fails: the library needs cgo.
func (c *Context) CaptureEnd() (uint64, error) { return 0, errNoCgo }

// Capturing fails: the library needs cgo.
func (c *Context) Capturing() (bool, error) { return false, errNoCgo }

// GraphLaunch fails: the library needs cgo.
func (c *Context) GraphLaunch(exec uint64, v StepValues) error { return errNoCgo }

// GraphDestroy fails: the library needs cgo.
func (c *Context) GraphDestroy(exec uint64) error { return errNoCgo }

// LtPlan fails: the library needs cgo.
func (c *Context) LtPlan(a LtArgs) (uint64, error) { return 0, errNoCgo }

// LtPlanDestroy fails: the library needs cgo.
func (c *Context) LtPlanDestroy(plan uint64) error { return errNoCgo }

// LtMatmul fails: the library needs cgo.
func (c *Context) LtMatmul(plan uint64, a, b, cm uintptr, side bool) error { return errNoCgo }

// SideFork fails: the library needs cgo.
func (c *Context) SideFork() error { return errNoCgo }

// SideJoin fails: the library needs cgo.
func (c *Context) SideJoin() error { return errNoCgo }
