package cuda

import "github.com/symddp/symddp/compute"

// Accumulate computes dst += src; they must have the same size.
func (e *Engine) Accumulate(dst, src compute.Tensor) {
	d, s := e.tensorOf("Accumulate", dst), e.tensorOf("Accumulate", src)
	if d.size != s.size {
		compute.PanicShapes("cuda", "Accumulate", "dst and src must have the same size", d.shape, s.shape)
	}
	e.fail("Accumulate", e.dev.Accumulate(d.ptr, s.ptr, d.size))
}

// Scale computes t *= s. While a graph is being captured, s is recorded as
// it is: the graph multiplies by the same s at every launch.
func (e *Engine) Scale(t compute.Tensor, s float32) {
	d := e.tensorOf("Scale", t)
	e.fail("Scale", e.dev.Scale(d.ptr, s, d.size))
}

// SumSquares returns the sum of the squares of t's elements, accumulated in
// double in a fixed order; it waits for the device. A failure of the device
// panics (see Engine).
func (e *Engine) SumSquares(t compute.Tensor) float64 {
	d := e.tensorOf("SumSquares", t)
	if e.capture.active {
		e.capture.fail("SumSquares")
		return 0
	}
	if e.err != nil {
		panicDevice("SumSquares", e.err)
	}
	v, err := e.dev.SumSquares(d.ptr, d.size, e.timeout)
	if err != nil {
		e.fail("SumSquares", err)
		panicDevice("SumSquares", err)
	}
	return v
}
