package cpu

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

var _ compute.Norms = (*Engine)(nil)

// rowsOf is the memory behind t read as rows of its last dimension: a
// (B,T,C) tensor is B·T rows of C.
func rowsOf(op string, t compute.Tensor) (s []float32, rows, cols int) {
	s = data(op, t)
	sh := t.Shape()
	cols = sh[len(sh)-1]
	return s, len(s) / cols, cols
}

// anyOverlap reports whether x shares memory with any of ys.
func anyOverlap(x []float32, ys ...[]float32) bool {
	for _, y := range ys {
		if overlap(x, y) {
			return true
		}
	}
	return false
}

// LayerNorm normalises each row of x (R,C) (any rank: rows of the last
// dimension) into y (the shape of x): y = (x-mean)·rstd·w + b, w and b (C),
// and writes each row's mean and rstd = 1/sqrt(var+eps) into mean and rstd
// (R). The variance is the mean of (x-mean)², from a second pass over the
// row. y may not overlap x.
func (e *Engine) LayerNorm(y, mean, rstd, x, w, b compute.Tensor, eps float32) {
	const op = "LayerNorm"
	rows, c := compute.LayerNormDims("cpu", x.Shape(), y.Shape(), w.Shape(), b.Shape(), mean.Shape(), rstd.Shape())
	xd, yd, md, rd := data(op, x), data(op, y), data(op, mean), data(op, rstd)
	wd, bd := data(op, w), data(op, b)
	if overlap(yd, xd) {
		compute.PanicShapes("cpu", op, "y overlaps x", x.Shape(), y.Shape())
	}
	hostloops.LayerNorm(yd, md, rd, xd, wd, bd, rows, c, eps)
}

// LayerNormBackward takes dy (R,C) and LayerNorm's x, w, mean and rstd,
// overwrites dw and db (C) with their gradients (sums over the rows, in row
// order) and writes the gradient at x into dx (R,C), added to dx when addDX
// is true. dx, dw and db may not overlap each other or the inputs.
func (e *Engine) LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd compute.Tensor, addDX bool) {
	const op = "LayerNormBackward"
	rows, c := compute.LayerNormBackwardDims("cpu", x.Shape(), dx.Shape(), dy.Shape(), w.Shape(), dw.Shape(), db.Shape(), mean.Shape(), rstd.Shape())
	xd, dxd, dyd := data(op, x), data(op, dx), data(op, dy)
	dwd, dbd, wd := data(op, dw), data(op, db), data(op, w)
	md, rd := data(op, mean), data(op, rstd)
	if overlap(dxd, dyd) || overlap(dxd, xd) {
		compute.PanicShapes("cpu", op, "dx overlaps dy or x", dx.Shape(), dy.Shape(), x.Shape())
	}
	// The C loop may assume that what it writes overlaps nothing else.
	if overlap(dwd, dbd) || anyOverlap(dwd, dxd, dyd, xd, wd) || anyOverlap(dbd, dxd, dyd, xd, wd) {
		compute.PanicShapes("cpu", op, "dw or db overlaps another tensor", dw.Shape(), db.Shape())
	}
	clear(dwd)
	clear(dbd)
	hostloops.LayerNormBackward(dxd, dwd, dbd, dyd, xd, wd, md, rd, rows, c, addDX)
}
