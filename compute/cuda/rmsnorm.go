package cuda

import "github.com/symddp/symddp/compute"

var _ compute.RMSNorms = (*Engine)(nil)

// RMSNorm normalises each row of x (R,C) (any rank: rows of the last
// dimension) into y: y = x·rstd·w with w (C), and writes each row's
// rstd = 1/sqrt(mean(x²)+eps) into rstd (R). One kernel (sdc_rms_norm)
// doing the CPU engine's float32 operations in its order, so both engines
// give the same bits. With a bf16 x (then y and w bf16 too; rstd stays
// fp32) the same kernel's bf16 form: fp32 statistics over a warp a row,
// y rounded to bf16. y may not overlap x.
func (e *Engine) RMSNorm(y, rstd, x, w compute.Tensor, eps float32) {
	const op = "RMSNorm"
	dt := x.DType()
	xd, yd, rd, wd := e.typedOf(op, x, dt), e.typedOf(op, y, dt), e.tensorOf(op, rstd), e.typedOf(op, w, dt)
	rows, c := compute.RMSNormDims("cuda", xd.shape, yd.shape, wd.shape, rd.shape)
	if overlap(yd, xd) {
		compute.PanicShapes("cuda", op, "y overlaps x", xd.shape, yd.shape)
	}
	e.fail(op, e.dev.RMSNorm(libDType(dt), yd.ptr, rd.ptr, xd.ptr, wd.ptr, rows, c, eps))
}

// RMSNormBackward takes dy (R,C) and RMSNorm's x, w and rstd, overwrites
// dw (C) with its gradient and writes the gradient at x into dx (R,C),
// added to dx when addDX is true (sdc_rms_norm_backward: a kernel for dx,
// one thread a column for dw, which adds the rows in row order as the CPU
// engine does: the same bits). With a bf16 x (then dx, dy and w bf16 too;
// rstd and dw fp32) the kernels' bf16 form, dw summed in chunks of rows.
// dx and dw may not overlap each other or the inputs.
func (e *Engine) RMSNormBackward(dx, dw, dy, x, w, rstd compute.Tensor, addDX bool) {
	const op = "RMSNormBackward"
	dt := x.DType()
	xd, dxd, dyd := e.typedOf(op, x, dt), e.typedOf(op, dx, dt), e.typedOf(op, dy, dt)
	dwd, wd, rd := e.tensorOf(op, dw), e.typedOf(op, w, dt), e.tensorOf(op, rstd)
	rows, c := compute.RMSNormBackwardDims("cuda", xd.shape, dxd.shape, dyd.shape, wd.shape, dwd.shape, rd.shape)
	if anyOverlap(dxd, dyd, xd, wd, rd) {
		compute.PanicShapes("cuda", op, "dx overlaps an input", dxd.shape, dyd.shape, xd.shape)
	}
	if anyOverlap(dwd, dxd, dyd, xd, wd, rd) {
		compute.PanicShapes("cuda", op, "dw overlaps another tensor", dwd.shape)
	}
	e.fail(op, e.dev.RMSNormBackward(libDType(dt), dxd.ptr, dwd.ptr, dyd.ptr, xd.ptr, wd.ptr, rd.ptr, rows, c, addDX))
}
