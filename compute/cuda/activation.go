package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

// BiasAct computes y = act(y + bias) in place in one kernel. y is (B,N),
// bias is (N) or nil.
func (e *Engine) BiasAct(y, bias compute.Tensor, act compute.Activation) {
	yd, rows, n := e.matrix("BiasAct", y)
	bd := e.optTensor("BiasAct", bias)
	var bp uintptr
	if bd != nil {
		if bd.size != n {
			compute.PanicShapes("cuda", "BiasAct", "bias must have one element per column of y", yd.shape, bd.shape)
		}
		bp = bd.ptr
	}
	a := activation("BiasAct", act)
	e.fail("BiasAct", e.dev.BiasAct(yd.ptr, rows, n, bp, a))
}

// BiasActBackward computes dy *= act'(y) in place, where y (B,N) is the
// activation's output, and dbias (N) = column sums of dy (added to dbias
// when accumulate is true), in one kernel with a deterministic reduction.
// dbias may be nil.
func (e *Engine) BiasActBackward(dy, y, dbias compute.Tensor, act compute.Activation, accumulate bool) {
	dd, rows, n := e.matrix("BiasActBackward", dy)
	yd := e.tensorOf("BiasActBackward", y)
	if yd.size != dd.size || yd.shape[0] != rows {
		compute.PanicShapes("cuda", "BiasActBackward", "dy and y must have the same shape", dd.shape, yd.shape)
	}
	db := e.optTensor("BiasActBackward", dbias)
	var dbp uintptr
	if db != nil {
		if db.size != n {
			compute.PanicShapes("cuda", "BiasActBackward", "dbias must have one element per column of dy", dd.shape, db.shape)
		}
		dbp = db.ptr
	}
	a := activation("BiasActBackward", act)
	e.fail("BiasActBackward", e.dev.BiasActBackward(cudalib.Float32, dd.ptr, yd.ptr, rows, n, dbp, a, accumulate, 0))
}

func activation(op string, act compute.Activation) cudalib.Activation {
	switch act {
	case compute.Identity:
		return cudalib.Identity
	case compute.ReLU:
		return cudalib.ReLU
	}
	panic(fmt.Sprintf("cuda: %s: unknown activation %d", op, act))
}
