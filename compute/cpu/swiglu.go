package cpu

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

var _ compute.SwiGLUs = (*Engine)(nil)

// SwiGLU computes y (R,F) = silu(a)·b element by element, silu(a) =
// a·σ(a), from ab (R,2F), each row [a | b]. y may not overlap ab.
func (e *Engine) SwiGLU(y, ab compute.Tensor) {
	const op = "SwiGLU"
	rows, f := compute.SwiGLUDims("cpu", op, y.Shape(), ab.Shape())
	yd, abd := data(op, y), data(op, ab)
	if overlap(yd, abd) {
		compute.PanicShapes("cpu", op, "y overlaps ab", y.Shape(), ab.Shape())
	}
	hostloops.SwiGLU(yd, abd, rows, f)
}

// SwiGLUBackward writes dab (R,2F), each row [da | db] with da =
// dy·b·silu'(a) and db = dy·silu(a), from dy (R,F) and ab. dab may not
// overlap dy or ab.
func (e *Engine) SwiGLUBackward(dab, dy, ab compute.Tensor) {
	const op = "SwiGLUBackward"
	rows, f := compute.SwiGLUDims("cpu", op, dy.Shape(), ab.Shape())
	dabd, dyd, abd := data(op, dab), data(op, dy), data(op, ab)
	if len(dabd) != len(abd) {
		compute.PanicShapes("cpu", op, "dab must have the size of ab", dab.Shape(), ab.Shape())
	}
	if anyOverlap(dabd, dyd, abd) {
		compute.PanicShapes("cpu", op, "dab overlaps dy or ab", dab.Shape(), dy.Shape(), ab.Shape())
	}
	hostloops.SwiGLUBackward(dabd, dyd, abd, rows, f)
}
