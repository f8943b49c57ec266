package cuda

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

var _ compute.GELUs = (*Engine)(nil)

// GELU computes y = gelu(x) element by element in one kernel (sdc_gelu), in
// GPT-2's tanh approximation with the CPU engine's float32 operations, so
// both engines give the same bits. y has the size of x and may not overlap
// it.
func (e *Engine) GELU(y, x compute.Tensor) {
	const op = "GELU"
	yd, xd := e.tensorOf(op, y), e.tensorOf(op, x)
	if yd.size != xd.size {
		compute.PanicShapes("cuda", op, "y must have the size of x", xd.shape, yd.shape)
	}
	if overlap(yd, xd) {
		compute.PanicShapes("cuda", op, "y overlaps x", xd.shape, yd.shape)
	}
	e.fail(op, e.dev.Gelu(cudalib.Float32, yd.ptr, xd.ptr, xd.size))
}

// GELUBackward computes dx = dy·gelu'(x) in one kernel
// (sdc_gelu_backward); dx may be dy (updated in place) but may not
// otherwise overlap dy or x.
func (e *Engine) GELUBackward(dx, dy, x compute.Tensor) {
	const op = "GELUBackward"
	dxd, dyd, xd := e.tensorOf(op, dx), e.tensorOf(op, dy), e.tensorOf(op, x)
	if dxd.size != xd.size || dyd.size != xd.size {
		compute.PanicShapes("cuda", op, "dx and dy must have the size of x", xd.shape, dxd.shape, dyd.shape)
	}
	if overlap(dxd, xd) || (dxd.ptr != dyd.ptr && overlap(dxd, dyd)) {
		compute.PanicShapes("cuda", op, "dx overlaps x, or dy without being dy", dxd.shape, dyd.shape, xd.shape)
	}
	e.fail(op, e.dev.GeluBackward(cudalib.Float32, dxd.ptr, dyd.ptr, xd.ptr, xd.size))
}
