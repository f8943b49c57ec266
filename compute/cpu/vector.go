package cpu

import "github.com/symddp/symddp/compute"

// Accumulate computes dst += src; they must have the same size.
func (e *Engine) Accumulate(dst, src compute.Tensor) {
	d, s := data("Accumulate", dst), data("Accumulate", src)
	if len(d) != len(s) {
		panicShapes("Accumulate", "dst and src must have the same size", dst.Shape(), src.Shape())
	}
	d = d[:len(s)]
	for i, v := range s {
		d[i] += v
	}
}

// Scale computes t *= s.
func (e *Engine) Scale(t compute.Tensor, s float32) {
	d := data("Scale", t)
	for i := range d {
		d[i] *= s
	}
}

// SumSquares returns the sum of the squares of t's elements, accumulated in
// float64 in index order (so the result is deterministic).
func (e *Engine) SumSquares(t compute.Tensor) float64 {
	var sum float64
	for _, v := range data("SumSquares", t) {
		sum += float64(v) * float64(v)
	}
	return sum
}
