package cuda

import "github.com/symddp/symddp/compute"

var _ compute.SwiGLUs = (*Engine)(nil)

// SwiGLU computes y = silu(a)·b element by element, silu(a) = a·σ(a), in
// one kernel (sdc_swiglu) with the CPU engine's float32 operations, so
// both engines give the same bits; on bf16 tensors (all three) the same
// operations on the widened elements, y rounded to bf16. y, a and b have
// the same size; y may not overlap a or b.
func (e *Engine) SwiGLU(y, a, b compute.Tensor) {
	const op = "SwiGLU"
	dt := a.DType()
	yd, ad, bd := e.typedOf(op, y, dt), e.typedOf(op, a, dt), e.typedOf(op, b, dt)
	if yd.size != ad.size || bd.size != ad.size {
		compute.PanicShapes("cuda", op, "y, a and b must have the same size", yd.shape, ad.shape, bd.shape)
	}
	if anyOverlap(yd, ad, bd) {
		compute.PanicShapes("cuda", op, "y overlaps a or b", yd.shape, ad.shape, bd.shape)
	}
	e.fail(op, e.dev.SwiGLU(libDType(dt), yd.ptr, ad.ptr, bd.ptr, ad.size))
}

// SwiGLUBackward writes da = dy·b·silu'(a) and db = dy·silu(a) in one
// kernel (sdc_swiglu_backward), likewise the CPU engine's bits, or on bf16
// tensors (all five) its bf16 form. da may be dy (it is then updated in
// place) but may not otherwise overlap an input; db may not overlap
// anything.
func (e *Engine) SwiGLUBackward(da, db, dy, a, b compute.Tensor) {
	const op = "SwiGLUBackward"
	dt := a.DType()
	dad, dbd, dyd := e.typedOf(op, da, dt), e.typedOf(op, db, dt), e.typedOf(op, dy, dt)
	ad, bd := e.typedOf(op, a, dt), e.typedOf(op, b, dt)
	n := ad.size
	if dad.size != n || dbd.size != n || dyd.size != n || bd.size != n {
		compute.PanicShapes("cuda", op, "da, db, dy, a and b must have the same size", dad.shape, dbd.shape, dyd.shape, ad.shape, bd.shape)
	}
	if anyOverlap(dad, ad, bd, dbd) || (dad.ptr != dyd.ptr && overlap(dad, dyd)) || anyOverlap(dbd, dyd, ad, bd) {
		compute.PanicShapes("cuda", op, "da or db overlaps another tensor (da may be dy)", dad.shape, dbd.shape, dyd.shape)
	}
	e.fail(op, e.dev.SwiGLUBackward(libDType(dt), dad.ptr, dbd.ptr, dyd.ptr, ad.ptr, bd.ptr, n))
}
