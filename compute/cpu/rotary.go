package cpu

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

var _ compute.Rotary = (*Engine)(nil)

// RotaryEmbedding returns the plan of s: its cos and sin table
// (T, HeadSize/2), each angle t·Theta^(-2i/HeadSize) and its cosine and
// sine computed in float64, then rounded to float32. It fails when the
// head size is odd, T or the head size is below 1, or Theta is not above 1.
func (e *Engine) RotaryEmbedding(s compute.RotarySpec) (compute.RotaryPlan, error) {
	if s.T < 1 || s.HeadSize < 2 || s.HeadSize%2 != 0 || !(s.Theta > 1) || math.IsInf(s.Theta, 0) {
		return nil, fmt.Errorf("cpu: rotary embedding %+v: want T >= 1, an even head size and a finite theta above 1", s)
	}
	half := s.HeadSize / 2
	p := &rotaryPlan{s: s, cos: make([]float32, s.T*half), sin: make([]float32, s.T*half)}
	for t := 0; t < s.T; t++ {
		for i := 0; i < half; i++ {
			freq := math.Pow(s.Theta, -float64(2*i)/float64(s.HeadSize))
			sin, cos := math.Sincos(float64(t) * freq)
			p.cos[t*half+i], p.sin[t*half+i] = float32(cos), float32(sin)
		}
	}
	return p, nil
}

// rotaryPlan holds the cos and sin table (T, HeadSize/2) of one
// RotarySpec.
type rotaryPlan struct {
	s        compute.RotarySpec
	cos, sin []float32
}

// run rotates x into y (inverse: the other way) after checking them.
func (p *rotaryPlan) run(op string, y, x compute.Tensor, inverse bool) {
	yd, xd := data(op, y), data(op, x)
	xs := x.Shape()
	width := xs[len(xs)-1]
	if len(yd) != len(xd) || width%p.s.HeadSize != 0 || (len(xd)/width)%p.s.T != 0 {
		compute.PanicShapes("cpu", op, fmt.Sprintf("want x (R, n·%d) with R a multiple of %d positions and y of its size", p.s.HeadSize, p.s.T), xs, y.Shape())
	}
	if &yd[0] != &xd[0] && overlap(yd, xd) {
		compute.PanicShapes("cpu", op, "the tensors overlap without being the same", xs, y.Shape())
	}
	hostloops.Rotate(yd, xd, p.cos, p.sin, len(xd)/width, width, p.s.HeadSize, p.s.T, inverse)
}

// Forward sets y to x rotated; y may be x.
func (p *rotaryPlan) Forward(y, x compute.Tensor) { p.run("rotary Forward", y, x, false) }

// Backward sets dx to dy rotated back; dx may be dy.
func (p *rotaryPlan) Backward(dx, dy compute.Tensor) { p.run("rotary Backward", dx, dy, true) }
