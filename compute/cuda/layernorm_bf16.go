package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// Norms on bf16 tensors: x, y, w, b, dy and dx bf16, mean, rstd and the
// gradients dw, db fp32 (sdg_layernorm_forward, sdg_layernorm_backward).
// The backward kernel adds into dx, dw and db: the engine zeroes first what
// the contract says is overwritten. eps is the kernels' 1e-5; a layer
// readies the engine at build time with PrepareBF16 (a NormSpec).

func (e *Engine) layerNormBF16(y, mean, rstd, x, w, b compute.Tensor, eps float32) {
	const op = "LayerNorm (bf16)"
	xd, yd, wd, bd := e.bf16Of(op, x), e.bf16Of(op, y), e.bf16Of(op, w), e.bf16Of(op, b)
	md, rd := e.tensorOf(op, mean), e.tensorOf(op, rstd)
	rows, c := compute.LayerNormDims("cuda", xd.shape, yd.shape, wd.shape, bd.shape, md.shape, rd.shape)
	e.checkNormBF16(op, rows, c, eps)
	if overlap(yd, xd) {
		compute.PanicShapes("cuda", op, "y overlaps x", xd.shape, yd.shape)
	}
	e.fail(op, e.bf.k.LayernormForward(yd.ptr, md.ptr, rd.ptr, xd.ptr, wd.ptr, bd.ptr, rows, c, e.info.Stream))
}

func (e *Engine) layerNormBackwardBF16(dx, dw, db, dy, x, w, mean, rstd compute.Tensor, addDX bool) {
	const op = "LayerNormBackward (bf16)"
	xd, dxd, dyd, wd := e.bf16Of(op, x), e.bf16Of(op, dx), e.bf16Of(op, dy), e.bf16Of(op, w)
	dwd, dbd := e.tensorOf(op, dw), e.tensorOf(op, db)
	md, rd := e.tensorOf(op, mean), e.tensorOf(op, rstd)
	rows, c := compute.LayerNormBackwardDims("cuda", xd.shape, dxd.shape, dyd.shape, wd.shape, dwd.shape, dbd.shape, md.shape, rd.shape)
	e.checkNormBF16(op, rows, c, bf16Eps)
	if anyOverlap(dxd, dyd, xd, wd) || overlap(dwd, dbd) {
		compute.PanicShapes("cuda", op, "dx overlaps an input, or dw overlaps db", dxd.shape, dyd.shape, xd.shape)
	}
	if !addDX {
		e.fail(op, e.dev.Zero(dxd.ptr, dxd.bytes()))
	}
	e.fail(op, e.dev.Zero(dwd.ptr, dwd.bytes()))
	e.fail(op, e.dev.Zero(dbd.ptr, dbd.bytes()))
	e.fail(op, e.bf.k.LayernormBackward(dxd.ptr, dwd.ptr, dbd.ptr, dyd.ptr, xd.ptr, wd.ptr, md.ptr, rd.ptr, rows, c, e.bf.ln.ptr, e.info.Stream))
}

// checkNormBF16 panics unless the engine was readied for a bf16 layer norm
// of these sizes (PrepareBF16).
func (e *Engine) checkNormBF16(op string, rows, c int, eps float32) {
	if eps != bf16Eps {
		panic(fmt.Sprintf("cuda: %s: eps %g, the bf16 kernels' is %g", op, eps, bf16Eps))
	}
	if e.bf == nil || e.bf.ln.bytes < e.bf.k.LayernormBackwardScratchBytes(rows, c) {
		panic(fmt.Sprintf("cuda: %s of %d rows of %d: the engine was not readied for it (PrepareBF16 with a compute.NormSpec at build time)", op, rows, c))
	}
}
