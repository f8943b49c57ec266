package cuda

import "github.com/symddp/symddp/compute"

var _ compute.SwiGLUs = (*Engine)(nil)

// SwiGLU computes y (R,F) = silu(a)·b element by element, silu(a) =
// a·σ(a), from ab (R,2F), each row [a | b], in one kernel (sdc_swiglu) with
// the CPU engine's float32 operations, so both engines give the same bits;
// on bf16 tensors (both) the same operations on the widened elements, y
// rounded to bf16. y may not overlap ab.
func (e *Engine) SwiGLU(y, ab compute.Tensor) {
	const op = "SwiGLU"
	dt := ab.DType()
	yd, abd := e.typedOf(op, y, dt), e.typedOf(op, ab, dt)
	rows, f := compute.SwiGLUDims("cuda", op, yd.shape, abd.shape)
	if overlap(yd, abd) {
		compute.PanicShapes("cuda", op, "y overlaps ab", yd.shape, abd.shape)
	}
	e.fail(op, e.dev.SwiGLU(libDType(dt), yd.ptr, abd.ptr, rows, f))
}

// SwiGLUBackward writes dab (R,2F), each row [da | db] with da =
// dy·b·silu'(a) and db = dy·silu(a), from dy (R,F) and ab in one kernel
// (sdc_swiglu_backward), likewise the CPU engine's bits, or on bf16
// tensors (all three) its bf16 form. dab may not overlap dy or ab.
func (e *Engine) SwiGLUBackward(dab, dy, ab compute.Tensor) {
	const op = "SwiGLUBackward"
	dt := ab.DType()
	dabd, dyd, abd := e.typedOf(op, dab, dt), e.typedOf(op, dy, dt), e.typedOf(op, ab, dt)
	rows, f := compute.SwiGLUDims("cuda", op, dyd.shape, abd.shape)
	if dabd.size != abd.size {
		compute.PanicShapes("cuda", op, "dab must have the size of ab", dabd.shape, abd.shape)
	}
	if anyOverlap(dabd, dyd, abd) {
		compute.PanicShapes("cuda", op, "dab overlaps dy or ab", dabd.shape, dyd.shape, abd.shape)
	}
	e.fail(op, e.dev.SwiGLUBackward(libDType(dt), dabd.ptr, dyd.ptr, abd.ptr, rows, f))
}
