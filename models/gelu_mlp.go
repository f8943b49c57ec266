package models

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// GELUMLP is GPT-2's feed-forward layer: c_proj(gelu(c_fc(x))), a Linear
// layer with bias from C features to the hidden width (4C in GPT-2), the
// tanh GELU, and a Linear layer with bias back to C. Its parameters are
// name+".c_fc.weight" (H,C), ".c_fc.bias", ".c_proj.weight" (C,H) and
// ".c_proj.bias", as GPT-2's checkpoints name them. It needs the engine's
// compute.GELUs.
type GELUMLP struct {
	// SharedHidden, when set before Build, is where gelu's output
	// (rows, H), the widest of the layer's activations, lives: memory that
	// the pool's other layers share, so it is not kept after Forward, and
	// Backward recomputes it from c_fc's output before c_proj's backward
	// reads it (llm.c's GELU recompute). nil: the layer keeps its own.
	SharedHidden *ScratchPool

	name      string
	c, hidden int
	fc, proj  *Linear

	gelu compute.GELUs
	h    compute.Tensor // gelu(c_fc(x)) (rows, H)
}

var _ Layer = (*GELUMLP)(nil)

// NewGELUMLP returns the layer from c features through hidden and back; the
// weights are N(0, std²), c_proj's N(0, projStd²), the biases zero.
func NewGELUMLP(name string, c, hidden int, std, projStd float64) *GELUMLP {
	linear := func(name string, in, out int, std float64) *Linear {
		l := NewLinear(name, in, out, compute.Identity)
		l.WeightInit, l.WeightStd = Normal, std
		return l
	}
	return &GELUMLP{name: name, c: c, hidden: hidden,
		fc:   linear(name+".c_fc", c, hidden, std),
		proj: linear(name+".c_proj", hidden, c, projStd)}
}

// Params declares c_fc's weight and bias, then c_proj's.
func (m *GELUMLP) Params() []ParamSpec { return append(m.fc.Params(), m.proj.Params()...) }

// Build builds the two projections and allocates gelu's output.
func (m *GELUMLP) Build(b Build) ([]int, error) {
	if size(b.In) != m.c {
		return nil, fmt.Errorf("%s: input of shape %v, want %d features", m.name, b.In, m.c)
	}
	if err := checkViews(m.name, m.Params(), b.Params, b.Grads); err != nil {
		return nil, err
	}
	g, err := compute.Require[compute.GELUs](b.Engine, "GELU")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	if _, err := m.fc.Build(b.part(b.In, 0, 2, b.NeedInputGrad)); err != nil {
		return nil, err
	}
	if _, err := m.proj.Build(b.part([]int{m.hidden}, 2, 4, true)); err != nil {
		return nil, err
	}
	m.gelu = g
	if m.h, err = hiddenAlloc(b, m.SharedHidden, m.hidden); err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	return []int{m.c}, nil
}

// Forward computes c_proj(gelu(c_fc(x))) for x (B, C).
func (m *GELUMLP) Forward(x compute.Tensor) compute.Tensor {
	m.gelu.GELU(m.h, m.fc.Forward(x))
	return m.proj.Forward(m.h)
}

// Backward writes the four parameters' gradients and returns dx (B, C)
// (nil without NeedInputGrad); with SharedHidden it first recomputes
// gelu's output, which c_proj's weight gradient reads.
func (m *GELUMLP) Backward(dy compute.Tensor) compute.Tensor {
	if m.SharedHidden != nil {
		m.gelu.GELU(m.h, m.fc.y)
	}
	d := m.proj.Backward(dy)
	m.gelu.GELUBackward(d, d, m.fc.y) // in place: the gradient at c_fc's output
	return m.fc.Backward(d)
}
