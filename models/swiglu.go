package models

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// SwiGLUMLP is Llama's feed-forward layer: down(silu(gate(x))⊙up(x)),
// three bias-free Linear layers from C to the hidden width F and back. Its
// parameters are name+".gate_proj.weight" (F,C), ".up_proj.weight" (F,C)
// and ".down_proj.weight" (C,F), as Hugging Face's LlamaMLP names them. It
// needs the engine's compute.SwiGLUs.
type SwiGLUMLP struct {
	name           string
	c, hidden      int
	gate, up, down *Linear

	e          compute.Engine
	sw         compute.SwiGLUs
	h, db      compute.Tensor // silu(a)·b and the gradient at b (rows, F)
	needInGrad bool
}

var _ Layer = (*SwiGLUMLP)(nil)

// NewSwiGLUMLP returns the layer from c features through hidden and back;
// the weights are N(0, std²), down_proj's N(0, downStd²).
func NewSwiGLUMLP(name string, c, hidden int, std, downStd float64) *SwiGLUMLP {
	return &SwiGLUMLP{name: name, c: c, hidden: hidden,
		gate: normalLinear(name+".gate_proj", c, hidden, std),
		up:   normalLinear(name+".up_proj", c, hidden, std),
		down: normalLinear(name+".down_proj", hidden, c, downStd)}
}

// normalLinear is a bias-free Linear layer with N(0, std²) weights.
func normalLinear(name string, in, out int, std float64) *Linear {
	l := NewLinear(name, in, out, compute.Identity)
	l.WeightInit, l.WeightStd, l.NoBias = Normal, std, true
	return l
}

// Params declares gate_proj, up_proj and down_proj's weights.
func (m *SwiGLUMLP) Params() []ParamSpec {
	return append(append(m.gate.Params(), m.up.Params()...), m.down.Params()...)
}

// Build builds the three projections and allocates silu(a)·b and the
// gradient at b.
func (m *SwiGLUMLP) Build(b Build) ([]int, error) {
	if size(b.In) != m.c {
		return nil, fmt.Errorf("%s: input of shape %v, want %d features", m.name, b.In, m.c)
	}
	if err := checkViews(m.name, m.Params(), b.Params, b.Grads); err != nil {
		return nil, err
	}
	sw, err := compute.Require[compute.SwiGLUs](b.Engine, "SwiGLU")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	for i, l := range []*Linear{m.gate, m.up, m.down} {
		in, need := b.In, b.NeedInputGrad
		if l == m.down {
			in, need = []int{m.hidden}, true
		}
		if _, err := l.Build(subBuild(b, i, in, need)); err != nil {
			return nil, err
		}
	}
	m.e, m.sw, m.needInGrad = b.Engine, sw, b.NeedInputGrad
	m.h, m.db = b.Engine.Alloc(b.Batch, m.hidden), b.Engine.Alloc(b.Batch, m.hidden)
	return []int{m.c}, nil
}

// subBuild is the Build of the i-th of a composite layer's bias-free
// Linear layers (one parameter each) on input shape in.
func subBuild(b Build, i int, in []int, needInGrad bool) Build {
	sb := Build{Engine: b.Engine, Batch: b.Batch, In: in, NeedInputGrad: needInGrad,
		Params: b.Params[i : i+1], Grads: b.Grads[i : i+1]}
	if b.AddGrads != nil {
		sb.AddGrads = b.AddGrads[i : i+1]
	}
	return sb
}

// Forward computes down(silu(gate(x))·up(x)) for x (B, C).
func (m *SwiGLUMLP) Forward(x compute.Tensor) compute.Tensor {
	a, bv := m.gate.Forward(x), m.up.Forward(x)
	m.sw.SwiGLU(m.h, a, bv)
	return m.down.Forward(m.h)
}

// Backward writes the three weights' gradients and returns dx (B, C), the
// sum of what goes through gate_proj and up_proj.
func (m *SwiGLUMLP) Backward(dy compute.Tensor) compute.Tensor {
	dh := m.down.Backward(dy)
	m.sw.SwiGLUBackward(dh, m.db, dh, m.gate.y, m.up.y) // dh becomes the gradient at a
	dx := m.gate.Backward(dh)
	dxu := m.up.Backward(m.db)
	if !m.needInGrad {
		return nil
	}
	m.e.Accumulate(dx, dxu)
	return dx
}
