package models

import (
	"errors"
	"fmt"
	"slices"

	"github.com/symddp/symddp/compute"
)

// SwiGLUMLP is Llama's feed-forward layer: down(silu(gate(x))⊙up(x)),
// bias-free projections from C to the hidden width F and back. Its
// parameters are name+".gate_proj.weight" (F,C), ".up_proj.weight" (F,C)
// and ".down_proj.weight" (C,F), as Hugging Face's LlamaMLP names them.
//
// gate_proj and up_proj are declared apart (their names, shapes and
// initialisation) but run as one Linear over their weights joined
// (compute.Joiner: the trainer lays them out back to back): one GEMM writes
// each row [gate | up] (B, 2F), the packed input of the engine's
// compute.SwiGLUs, and the backward is one GEMM for both weights' gradients
// and one for the input gradient. It needs the engine's compute.SwiGLUs and
// compute.Joiner.
type SwiGLUMLP struct {
	// SharedHidden, when set before Build, is where silu(a)·b (rows, F),
	// the widest of the layer's activations, lives: memory that the pool's
	// other layers share, so it is not kept after Forward, and Backward
	// recomputes it from a and b before down_proj's backward reads it
	// (Recompute "gelu": a Llama's counterpart of llm.c's GELU recompute).
	// nil: the layer keeps its own.
	SharedHidden *ScratchPool

	name         string
	c, hidden    int
	specs        []ParamSpec // gate_proj and up_proj's weights
	gateUp, down *Linear     // gateUp: the two projections as one

	sw     compute.SwiGLUs
	h, dab compute.Tensor // silu(a)·b (rows, F) and the gradient at [a | b] (rows, 2F)
}

var _ Layer = (*SwiGLUMLP)(nil)

// NewSwiGLUMLP returns the layer from c features through hidden and back;
// the weights are N(0, std²), down_proj's N(0, downStd²).
func NewSwiGLUMLP(name string, c, hidden int, std, downStd float64) *SwiGLUMLP {
	m := &SwiGLUMLP{name: name, c: c, hidden: hidden,
		gateUp: normalLinear(name+".gate_up", c, 2*hidden, std),
		down:   normalLinear(name+".down_proj", hidden, c, downStd)}
	for _, l := range []*Linear{normalLinear(name+".gate_proj", c, hidden, std), normalLinear(name+".up_proj", c, hidden, std)} {
		m.specs = append(m.specs, l.Params()...)
	}
	return m
}

// normalLinear is a bias-free Linear layer with N(0, std²) weights.
func normalLinear(name string, in, out int, std float64) *Linear {
	l := NewLinear(name, in, out, compute.Identity)
	l.WeightInit, l.WeightStd, l.NoBias = Normal, std, true
	return l
}

// Params declares gate_proj, up_proj and down_proj's weights.
func (m *SwiGLUMLP) Params() []ParamSpec {
	return append(slices.Clone(m.specs), m.down.Params()...)
}

// Build builds the joined projection and down_proj and allocates silu(a)·b
// and the gradient at [a | b].
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
	gb, err := m.joined(b)
	if err != nil {
		return nil, err
	}
	if _, err := m.gateUp.Build(gb); err != nil {
		return nil, err
	}
	if _, err := m.down.Build(m.downBuild(b)); err != nil {
		return nil, err
	}
	m.sw = sw
	if b.bf16 {
		if m.SharedHidden != nil {
			return nil, fmt.Errorf("%s: a shared hidden activation (recompute) has no bf16 form", m.name)
		}
		m.h, m.dab = b.allocBF16(m.hidden), b.allocGradBF16(2*m.hidden)
		return []int{m.c}, nil
	}
	if m.h, err = hiddenAlloc(b, m.SharedHidden, m.hidden); err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	m.dab = b.Alloc(b.Batch, 2*m.hidden)
	return []int{m.c}, nil
}

// joined is the Build of the joined projection: gate_proj's and up_proj's
// weights as one (2F, C) matrix (joinedBuild).
func (m *SwiGLUMLP) joined(b Build) (Build, error) {
	return joinedBuild(b, m.name, m.specs, []int{2 * m.hidden, m.c})
}

// downBuild is down_proj's part of b: it takes the hidden width and ends a
// residual block when the layer does (its output kept out of a
// Checkpoint's scratch where the block's is: Build.keep).
func (m *SwiGLUMLP) downBuild(b Build) Build {
	p := b.part([]int{m.hidden}, 2, 3, true)
	p.onto, p.keep = b.onto, b.keep
	return p
}

// checkBF16 asks the engine for the two projections and SwiGLU in bf16,
// down_proj ending a residual block when the layer does (bf16Layer).
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
	if err := compute.CheckBF16(b.Engine, compute.SwiGLUSpec{Rows: b.Batch, Cols: m.hidden}); err != nil {
		return nil, fmt.Errorf("%s: %w", m.name, err)
	}
	gb, err := m.joined(b)
	if err != nil {
		return nil, err
	}
	if _, err := m.gateUp.checkBF16(gb); err != nil {
		return nil, err
	}
	if _, err := m.down.checkBF16(m.downBuild(b)); err != nil {
		return nil, err
	}
	return []int{m.c}, nil
}

// forwardOnto computes r + down(silu(gate(x))·up(x)) (streamOut: a bf16
// layer built to end a residual block).
func (m *SwiGLUMLP) forwardOnto(x, r compute.Tensor) compute.Tensor {
	m.sw.SwiGLU(m.h, m.gateUp.Forward(x))
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
	m.sw.SwiGLU(m.h, m.gateUp.Forward(x))
	return m.down.Forward(m.h)
}

// endsStream: dy goes to down_proj alone, whose output is the layer's
// (streamEnd).
func (m *SwiGLUMLP) endsStream() bool { return m.down.endsStream() }

// Backward writes the three weights' gradients and returns dx (B, C), what
// goes back through gate_proj and up_proj (one GEMM); with SharedHidden it
// first recomputes silu(a)·b, which down_proj's weight gradient reads.
func (m *SwiGLUMLP) Backward(dy compute.Tensor) compute.Tensor {
	if m.SharedHidden != nil {
		m.sw.SwiGLU(m.h, m.gateUp.y)
	}
	dh := m.down.Backward(dy)
	m.sw.SwiGLUBackward(m.dab, dh, m.gateUp.y)
	return m.gateUp.Backward(m.dab) // nil without NeedInputGrad
}
