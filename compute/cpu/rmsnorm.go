package cpu

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

var _ compute.RMSNorms = (*Engine)(nil)

// RMSNorm normalises each row of x (R,C) (any rank: rows of the last
// dimension) into y (the shape of x): y = x·rstd·w with w (C) and
// rstd = 1/sqrt(mean(x²)+eps), which it writes into rstd (R). y may not
// overlap x.
func (e *Engine) RMSNorm(y, rstd, x, w compute.Tensor, eps float32) {
	const op = "RMSNorm"
	rows, c := compute.RMSNormDims("cpu", x.Shape(), y.Shape(), w.Shape(), rstd.Shape())
	xd, yd, rd, wd := data(op, x), data(op, y), data(op, rstd), data(op, w)
	if overlap(yd, xd) {
		compute.PanicShapes("cpu", op, "y overlaps x", x.Shape(), y.Shape())
	}
	hostloops.RMSNorm(yd, rd, xd, wd, rows, c, eps)
}

// RMSNormBackward takes dy (R,C) and RMSNorm's x, w and rstd, overwrites
// dw (C) with its gradient (a sum over the rows, in row order) and writes
// the gradient at x into dx (R,C), added to dx when addDX is true. dx and
// dw may not overlap each other or the inputs.
func (e *Engine) RMSNormBackward(dx, dw, dy, x, w, rstd compute.Tensor, addDX bool) {
	const op = "RMSNormBackward"
	rows, c := compute.RMSNormBackwardDims("cpu", x.Shape(), dx.Shape(), dy.Shape(), w.Shape(), dw.Shape(), rstd.Shape())
	xd, dxd, dyd := data(op, x), data(op, dx), data(op, dy)
	dwd, wd, rd := data(op, dw), data(op, w), data(op, rstd)
	if overlap(dxd, dyd) || overlap(dxd, xd) {
		compute.PanicShapes("cpu", op, "dx overlaps dy or x", dx.Shape(), dy.Shape(), x.Shape())
	}
	if anyOverlap(dwd, dxd, dyd, xd, wd, rd) {
		compute.PanicShapes("cpu", op, "dw overlaps another tensor", dw.Shape())
	}
	clear(dwd)
	hostloops.RMSNormBackward(dxd, dwd, dyd, xd, wd, rd, rows, c, addDX)
}
