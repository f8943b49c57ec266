package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

// Norms on bf16 tensors: x, y, w, b, dy and dx bf16, mean, rstd and the
// gradients dw, db fp32 (sdc_layer_norm, sdc_layer_norm_backward with
// SDC_BF16).
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
	e.fail(op, e.dev.LayerNorm(cudalib.BFloat16, yd.ptr, md.ptr, rd.ptr, xd.ptr, wd.ptr, bd.ptr, rows, c, eps))
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
	e.fail(op, e.dev.LayerNormBackward(cudalib.BFloat16, dxd.ptr, dwd.ptr, dbd.ptr, dyd.ptr, xd.ptr, wd.ptr, md.ptr, rd.ptr, rows, c, true, e.bf.ln.ptr))
}

// checkNormBF16 panics unless the engine was readied for a bf16 layer norm
// of these sizes (PrepareBF16).
func (e *Engine) checkNormBF16(op string, rows, c int, eps float32) {
	if eps != bf16Eps {
		panic(fmt.Sprintf("cuda: %s: eps %g, the bf16 kernels' is %g", op, eps, bf16Eps))
	}
	need, err := e.dev.LayerNormBackwardScratchBytes(cudalib.BFloat16, rows, c)
	if e.bf == nil || err != nil || e.bf.ln.bytes < need {
		panic(fmt.Sprintf("cuda: %s of %d rows of %d: the engine was not readied for it (PrepareBF16 with a compute.NormSpec at build time)", op, rows, c))
	}
}
