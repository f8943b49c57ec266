package cuda

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

var _ compute.Norms = (*Engine)(nil)

// rowsOf is t read as rows of its last dimension: a (B,T,C) tensor is B·T
// rows of C.
func (e *Engine) rowsOf(op string, t compute.Tensor) (d *Tensor, rows, cols int) {
	d = e.tensorOf(op, t)
	cols = d.shape[len(d.shape)-1]
	return d, d.size / cols, cols
}

// anyOverlap reports whether a shares device memory with any of bs.
func anyOverlap(a *Tensor, bs ...*Tensor) bool {
	for _, b := range bs {
		if overlap(a, b) {
			return true
		}
	}
	return false
}

// LayerNorm normalises each row of x (R,C) (any rank: rows of the last
// dimension) into y: y = (x-mean)·rstd·w + b, w and b (C), and writes each
// row's mean and rstd = 1/sqrt(var+eps) into mean and rstd (R). One kernel
// (sdc_layer_norm) doing the CPU engine's float32 operations in its order,
// so both engines give the same bits. y may not overlap x. With a bf16 x
// (and y, w, b) it runs the bf16 kernel (layernorm_bf16.go).
func (e *Engine) LayerNorm(y, mean, rstd, x, w, b compute.Tensor, eps float32) {
	const op = "LayerNorm"
	if x.DType() == compute.BF16 {
		e.layerNormBF16(y, mean, rstd, x, w, b, eps)
		return
	}
	xd, yd, md, rd := e.tensorOf(op, x), e.tensorOf(op, y), e.tensorOf(op, mean), e.tensorOf(op, rstd)
	wd, bd := e.tensorOf(op, w), e.tensorOf(op, b)
	rows, c := compute.LayerNormDims("cuda", xd.shape, yd.shape, wd.shape, bd.shape, md.shape, rd.shape)
	if overlap(yd, xd) {
		compute.PanicShapes("cuda", op, "y overlaps x", xd.shape, yd.shape)
	}
	e.fail(op, e.dev.LayerNorm(cudalib.Float32, yd.ptr, md.ptr, rd.ptr, xd.ptr, wd.ptr, bd.ptr, rows, c, eps))
}

// LayerNormBackward takes dy (R,C) and LayerNorm's x, w, mean and rstd,
// overwrites dw and db (C) with their gradients and writes the gradient at
// x into dx (R,C), added to dx when addDX is true
// (sdc_layer_norm_backward: a kernel for dx, one thread a column for dw and
// db, which add the rows in row order as the CPU engine does: the same
// bits). dx, dw and db may not overlap each other or the inputs. With a
// bf16 x (and dx, dy, w) it runs the bf16 kernel (layernorm_bf16.go).
func (e *Engine) LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd compute.Tensor, addDX bool) {
	const op = "LayerNormBackward"
	if x.DType() == compute.BF16 {
		e.layerNormBackwardBF16(dx, dw, db, dy, x, w, mean, rstd, addDX)
		return
	}
	xd, dxd, dyd := e.tensorOf(op, x), e.tensorOf(op, dx), e.tensorOf(op, dy)
	dwd, dbd, wd := e.tensorOf(op, dw), e.tensorOf(op, db), e.tensorOf(op, w)
	md, rd := e.tensorOf(op, mean), e.tensorOf(op, rstd)
	rows, c := compute.LayerNormBackwardDims("cuda", xd.shape, dxd.shape, dyd.shape, wd.shape, dwd.shape, dbd.shape, md.shape, rd.shape)
	if anyOverlap(dxd, dyd, xd, wd, md, rd) {
		compute.PanicShapes("cuda", op, "dx overlaps an input", dxd.shape, dyd.shape, xd.shape)
	}
	if overlap(dwd, dbd) || anyOverlap(dwd, dxd, dyd, xd, wd, md, rd) || anyOverlap(dbd, dxd, dyd, xd, wd, md, rd) {
		compute.PanicShapes("cuda", op, "dw or db overlaps another tensor", dwd.shape, dbd.shape)
	}
	e.fail(op, e.dev.LayerNormBackward(cudalib.Float32, dxd.ptr, dwd.ptr, dbd.ptr, dyd.ptr, xd.ptr, wd.ptr, md.ptr, rd.ptr, rows, c, addDX, 0))
}
