package cpu

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

// Accumulate computes dst += src; they must have the same size.
func (e *Engine) Accumulate(dst, src compute.Tensor) {
	d, s := data("Accumulate", dst), data("Accumulate", src)
	if len(d) != len(s) {
		compute.PanicShapes("cpu", "Accumulate", "dst and src must have the same size", dst.Shape(), src.Shape())
	}
	hostloops.Acc1(d, s)
}

// Scale computes t *= s.
func (e *Engine) Scale(t compute.Tensor, s float32) {
	hostloops.Scale(data("Scale", t), s)
}

// SumSquares returns the sum of the squares of t's elements, accumulated in
// float64 in index order (so the result is deterministic).
func (e *Engine) SumSquares(t compute.Tensor) float64 {
	return hostloops.SumSquares(data("SumSquares", t))
}
