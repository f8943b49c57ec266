package cpu

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

var _ compute.Rotary = (*Engine)(nil)

// RotaryEmbedding returns the plan of s: its cos and sin table
// (T, HeadSize/2) of float32 values (compute.RotarySpec.Table). It fails
// when the head size is odd, T or the head size is below 1, or Theta is
// not above 1.
func (e *Engine) RotaryEmbedding(s compute.RotarySpec) (compute.RotaryPlan, error) {
	cos, sin, err := s.Table()
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	return &rotaryPlan{s: s, cos: cos, sin: sin}, nil
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
