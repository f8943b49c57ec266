package cpu

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

var _ compute.SwiGLUs = (*Engine)(nil)

// SwiGLU computes y = silu(a)·b element by element, silu(a) = a·σ(a).
// y, a and b have the same size; y may not overlap a or b.
func (e *Engine) SwiGLU(y, a, b compute.Tensor) {
	const op = "SwiGLU"
	yd, ad, bd := data(op, y), data(op, a), data(op, b)
	if len(yd) != len(ad) || len(bd) != len(ad) {
		compute.PanicShapes("cpu", op, "y, a and b must have the same size", y.Shape(), a.Shape(), b.Shape())
	}
	if anyOverlap(yd, ad, bd) {
		compute.PanicShapes("cpu", op, "y overlaps a or b", y.Shape(), a.Shape(), b.Shape())
	}
	hostloops.SwiGLU(yd, ad, bd)
}

// SwiGLUBackward writes da = dy·b·silu'(a) and db = dy·silu(a). da may be
// dy (it is then updated in place) but may not otherwise overlap an input;
// db may not overlap anything.
func (e *Engine) SwiGLUBackward(da, db, dy, a, b compute.Tensor) {
	const op = "SwiGLUBackward"
	dad, dbd, dyd, ad, bd := data(op, da), data(op, db), data(op, dy), data(op, a), data(op, b)
	n := len(ad)
	if len(dad) != n || len(dbd) != n || len(dyd) != n || len(bd) != n {
		compute.PanicShapes("cpu", op, "da, db, dy, a and b must have the same size", da.Shape(), db.Shape(), dy.Shape(), a.Shape(), b.Shape())
	}
	same := &dad[0] == &dyd[0]
	if anyOverlap(dad, ad, bd, dbd) || (!same && overlap(dad, dyd)) || anyOverlap(dbd, dyd, ad, bd) {
		compute.PanicShapes("cpu", op, "da or db overlaps another tensor (da may be dy)", da.Shape(), db.Shape(), dy.Shape())
	}
	hostloops.SwiGLUBackward(dad, dbd, dyd, ad, bd)
}
