package cpu

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

// BiasAct computes y = act(y + bias) in place. y is (B,N), bias is (N) or nil.
func (e *Engine) BiasAct(y, bias compute.Tensor, act compute.Activation) {
	yd, rows, n := matrix("BiasAct", y)
	bd := optData("BiasAct", bias)
	if bd != nil && len(bd) != n {
		compute.PanicShapes("cpu", "BiasAct", "bias must have one element per column of y", y.Shape(), bias.Shape())
	}
	checkAct("BiasAct", act)
	hostloops.BiasAct(yd, bd, rows, n, act == compute.ReLU)
}

// BiasActBackward computes dy *= act'(y) in place, where y (B,N) is the
// activation's output, and dbias (N) = column sums of dy (added to dbias
// when accumulate is true). dbias may be nil.
func (e *Engine) BiasActBackward(dy, y, dbias compute.Tensor, act compute.Activation, accumulate bool) {
	dd, rows, n := matrix("BiasActBackward", dy)
	yd := data("BiasActBackward", y)
	if len(yd) != len(dd) || y.Shape()[0] != rows {
		compute.PanicShapes("cpu", "BiasActBackward", "dy and y must have the same shape", dy.Shape(), y.Shape())
	}
	db := optData("BiasActBackward", dbias)
	if db != nil && len(db) != n {
		compute.PanicShapes("cpu", "BiasActBackward", "dbias must have one element per column of dy", dy.Shape(), dbias.Shape())
	}
	checkAct("BiasActBackward", act)
	if act == compute.ReLU {
		// ReLU's output is 0 exactly where its input was <= 0: there the
		// gradient is 0 (the subgradient at 0 is taken as 0).
		hostloops.ReLUMask(dd, yd)
	}
	if db == nil {
		return
	}
	if !accumulate {
		clear(db)
	}
	hostloops.ColSums(db, dd, rows, n)
}

func checkAct(op string, act compute.Activation) {
	if act != compute.Identity && act != compute.ReLU {
		panic(fmt.Sprintf("cpu: %s: unknown activation %d", op, act))
	}
}
