package cpu

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

var _ compute.GELUs = (*Engine)(nil)

// GELU computes y = gelu(x) element by element in GPT-2's tanh
// approximation (computed as x/(1+e^(-2u)), which is the same function).
// y has the size of x and may not overlap it.
func (e *Engine) GELU(y, x compute.Tensor) {
	const op = "GELU"
	yd, xd := data(op, y), data(op, x)
	if len(yd) != len(xd) {
		compute.PanicShapes("cpu", op, "y must have the size of x", x.Shape(), y.Shape())
	}
	if overlap(yd, xd) {
		compute.PanicShapes("cpu", op, "y overlaps x", x.Shape(), y.Shape())
	}
	hostloops.GELU(yd, xd)
}

// GELUBackward computes dx = dy·gelu'(x); dx may be dy (it is then updated
// in place) but may not otherwise overlap dy or x.
func (e *Engine) GELUBackward(dx, dy, x compute.Tensor) {
	const op = "GELUBackward"
	dxd, dyd, xd := data(op, dx), data(op, dy), data(op, x)
	if len(dxd) != len(xd) || len(dyd) != len(xd) {
		compute.PanicShapes("cpu", op, "dx and dy must have the size of x", x.Shape(), dx.Shape(), dy.Shape())
	}
	same := &dxd[0] == &dyd[0]
	if overlap(dxd, xd) || (!same && overlap(dxd, dyd)) {
		compute.PanicShapes("cpu", op, "dx overlaps x, or dy without being dy", dx.Shape(), dy.Shape(), x.Shape())
	}
	hostloops.GELUBackward(dxd, dyd, xd)
}
