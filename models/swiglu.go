package models

import (
	"errors"
	"fmt"

	"github.com/symddp/symddp/compute"
)

// SwiGLUMLP is Llama's feed-forward layer: down(silu(gate(x))⊙up(x)),
// three bias-free Linear layers from C to the hidden width F and back. Its
// parameters are name+".gate_proj.weight" (F,C), ".up_proj.weight" (F,C)
// and ".down_proj.weight" (C,F), as Hugging Face's LlamaMLP names them. It
// needs the engine's compute.SwiGLUs.
type SwiGLUMLP struct {
	// SharedHidden, when set before Build, is where silu(a)·b (rows, F),
	// the widest of the layer's activations, lives: memory that the pool's
	// other layers share, so it is not kept after Forward, and Backward
	// recomputes it from a and b before down_proj's backward reads it
	// (Recompute "gelu": a Llama's counterpart of llm.c's GELU recompute).
	// nil: the layer keeps its own.
	SharedHidden *ScratchPool

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
	m.up.addDXOf = nil
	if b.bf16 {
		m.up.addDXOf = m.gate // up_proj adds its input gradient to gate_proj's
	}
	for i, l := range []*Linear{m.gate, m.up, m.down} {
		if _, err := l.Build(m.part(b, i)); err != nil {
			return nil, err
		}
	}
	m.e, m.sw, m.needInGrad = b.Engine, sw, b.NeedInputGrad
	if b.bf16 {
		if m.SharedHidden != nil {
			return nil, fmt.Errorf("%s: a shared hidden activation (recompute) has no bf16 form", m.name)
		}
		m.h, m.db = b.allocBF16(m.hidden), b.allocGradBF16(m.hidden)
		return []int{m.c}, nil
	}
	if m.h, err = hiddenAlloc(b, m.SharedHidden, m.hidden); err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	m.db = b.Alloc(b.Batch, m.hidden)
	return []int{m.c}, nil
}

// part is projection i's (gate, up, down) part of b: down_proj takes the
// hidden width and ends a residual block when the layer does (its output
// kept out of a Checkpoint's scratch where the block's is: Build.keep).
func (m *SwiGLUMLP) part(b Build, i int) Build {
	if i < 2 {
		return b.part(b.In, i, i+1, b.NeedInputGrad)
	}
	p := b.part([]int{m.hidden}, 2, 3, true)
	p.onto, p.keep = b.onto, b.keep
	return p
}

// checkBF16 asks the engine for the three projections and SwiGLU in bf16,
// up_proj adding its input gradient to gate_proj's and down_proj ending a
// residual block when the layer does (bf16Layer).
func (m *SwiGLUMLP) checkBF16(b Build) ([]int, error) {
	if size(b.In) != m.c {
		return nil, fmt.Errorf("%s: input of shape %v, want %d features", m.name, b.In, m.c)
	}
	if m.SharedHidden != nil {
		return nil, fmt.Errorf("%s: a shared hidden activation (recompute) has no bf16 form", m.name)
	}
	if _, err := compute.Require[compute.SwiGLUs](b.Engine, "SwiGLU"); err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	if err := compute.CheckBF16(b.Engine, compute.SwiGLUSpec{N: b.Batch * m.hidden}); err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	m.up.addDXOf = m.gate
	for i, l := range []*Linear{m.gate, m.up, m.down} {
		if _, err := l.checkBF16(m.part(b, i)); err != nil {
			return nil, err
		}
	}
	return []int{m.c}, nil
}

// forwardOnto computes r + down(silu(gate(x))·up(x)) (streamOut: a bf16
// layer built to end a residual block).
func (m *SwiGLUMLP) forwardOnto(x, r compute.Tensor) compute.Tensor {
	a, bv := m.gate.Forward(x), m.up.Forward(x)
	m.sw.SwiGLU(m.h, a, bv)
	return m.down.forwardOnto(m.h, r)
}

// hiddenAlloc allocates an MLP's hidden activation (Batch, hidden): from
// shared when set, a part of its own in that pool, from b otherwise.
func hiddenAlloc(b Build, shared *ScratchPool, hidden int) (compute.Tensor, error) {
	if shared == nil {
		return b.Alloc(b.Batch, hidden), nil
	}
	if b.Scratch != nil && b.Scratch.pool == shared {
		return nil, errors.New("the shared hidden activation's pool is the one of the checkpoint around the layer: give it a pool of its own")
	}
	if err := shared.bind(b.Engine); err != nil {
		return nil, err
	}
	return shared.Scratch().Alloc(b.Engine, b.Batch, hidden), nil
}

// Forward computes down(silu(gate(x))·up(x)) for x (B, C).
func (m *SwiGLUMLP) Forward(x compute.Tensor) compute.Tensor {
	a, bv := m.gate.Forward(x), m.up.Forward(x)
	m.sw.SwiGLU(m.h, a, bv)
	return m.down.Forward(m.h)
}

// endsStream: dy goes to down_proj alone, whose output is the layer's
// (streamEnd).
func (m *SwiGLUMLP) endsStream() bool { return m.down.endsStream() }

// Backward writes the three weights' gradients and returns dx (B, C), the
// sum of what goes through gate_proj and up_proj; with SharedHidden it
// first recomputes silu(a)·b, which down_proj's weight gradient reads.
func (m *SwiGLUMLP) Backward(dy compute.Tensor) compute.Tensor {
	if m.SharedHidden != nil {
		m.sw.SwiGLU(m.h, m.gate.y, m.up.y)
	}
	dh := m.down.Backward(dy)
	m.sw.SwiGLUBackward(dh, m.db, dh, m.gate.y, m.up.y) // dh becomes the gradient at a
	dx := m.gate.Backward(dh)
	dxu := m.up.Backward(m.db) // in bf16 added to gate_proj's, in its GEMM
	if !m.needInGrad {
		return nil
	}
	if m.up.addDXOf == nil {
		m.e.Accumulate(dx, dxu)
	}
	return dx
}
