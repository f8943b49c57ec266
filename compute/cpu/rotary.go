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

// run rotates the first heads of every row of x in place (inverse: the
// other way) after checking them.
func (p *rotaryPlan) run(op string, x compute.Tensor, heads int, inverse bool) {
	xd := data(op, x)
	ld, width := rotaryRows(op, p.s, x.Shape(), heads)
	hostloops.Rotate(xd, xd, p.cos, p.sin, len(xd)/ld, width, ld, p.s.HeadSize, p.s.T, inverse)
}

// rotaryRows checks a rotation of the first heads of the rows of a tensor
// of shape xs and returns its row length ld and the columns it turns.
func rotaryRows(op string, s compute.RotarySpec, xs compute.Shape, heads int) (ld, width int) {
	ld, width = xs[len(xs)-1], heads*s.HeadSize
	if heads < 1 || width > ld || (xs.Size()/ld)%s.T != 0 {
		compute.PanicShapes("cpu", op, fmt.Sprintf("want x (R, W) with R a multiple of %d positions and W at least %d heads of %d", s.T, heads, s.HeadSize), xs)
	}
	return ld, width
}

// Forward rotates the first heads of every row of x in place.
func (p *rotaryPlan) Forward(x compute.Tensor, heads int) { p.run("rotary Forward", x, heads, false) }

// Backward rotates the first heads of every row of dx back, in place.
func (p *rotaryPlan) Backward(dx compute.Tensor, heads int) {
	p.run("rotary Backward", dx, heads, true)
}
