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
	m.fc.gelu = b.bf16 // c_fc's epilogue applies the GELU in bf16
	if _, err := m.fc.Build(b.part(b.In, 0, 2, b.NeedInputGrad)); err != nil {
		return nil, err
	}
	if _, err := m.proj.Build(m.projBuild(b)); err != nil {
		return nil, err
	}
	m.gelu = g
	if b.bf16 {
		// c_proj's input-gradient GEMM applies GELU's derivative
		if err := m.proj.fused.ChainInput(m.fc.fused); err != nil {
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
		m.h = nil // c_fc's output is gelu's
		return []int{m.c}, nil
	}
	if m.h, err = hiddenAlloc(b, m.SharedHidden, m.hidden); err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	return []int{m.c}, nil
}

// projBuild is c_proj's part of b: it ends a residual block when the
// layer does.
func (m *GELUMLP) projBuild(b Build) Build {
	p := b.part([]int{m.hidden}, 2, 4, true)
	p.onto, p.keep = b.onto, b.keep
	return p
}

// checkBF16 asks the engine for both projections in bf16, c_fc with GELU
// in its epilogue (bf16Layer).
func (m *GELUMLP) checkBF16(b Build) ([]int, error) {
	if size(b.In) != m.c {
		return nil, fmt.Errorf("%s: input of shape %v, want %d features", m.name, b.In, m.c)
	}
	if m.SharedHidden != nil {
		return nil, fmt.Errorf("%s: a shared hidden activation (recompute) has no bf16 form", m.name)
	}
	m.fc.gelu = true
	if _, err := m.fc.checkBF16(b.part(b.In, 0, 2, b.NeedInputGrad)); err != nil {
		return nil, err
	}
	if _, err := m.proj.checkBF16(m.projBuild(b)); err != nil {
		return nil, err
	}
	return []int{m.c}, nil
}

// Forward computes c_proj(gelu(c_fc(x))) for x (B, C).
func (m *GELUMLP) Forward(x compute.Tensor) compute.Tensor {
	if m.h == nil { // bf16: GELU in c_fc's epilogue
		return m.proj.Forward(m.fc.Forward(x))
	}
	m.gelu.GELU(m.h, m.fc.Forward(x))
	return m.proj.Forward(m.h)
}

// forwardOnto computes r + c_proj(gelu(c_fc(x))) (streamOut: a bf16 layer
// built to end a residual block).
func (m *GELUMLP) forwardOnto(x, r compute.Tensor) compute.Tensor {
	return m.proj.forwardOnto(m.fc.Forward(x), r)
}

// endsStream: dy goes to c_proj alone, whose output is the layer's
// (streamEnd).
func (m *GELUMLP) endsStream() bool { return m.proj.endsStream() }

// Backward writes the four parameters' gradients and returns dx (B, C)
// (nil without NeedInputGrad); with SharedHidden it first recomputes
// gelu's output, which c_proj's weight gradient reads. In bf16 c_proj's
// input gradient comes with GELU's derivative applied.
func (m *GELUMLP) Backward(dy compute.Tensor) compute.Tensor {
	if m.h == nil {
		return m.fc.Backward(m.proj.Backward(dy))
	}
	if m.SharedHidden != nil {
		m.gelu.GELU(m.h, m.fc.y)
	}
	d := m.proj.Backward(dy)
	m.gelu.GELUBackward(d, d, m.fc.y) // in place: the gradient at c_fc's output
	return m.fc.Backward(d)
}
