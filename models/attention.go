package models

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// CausalSelfAttention is the attention of a transformer block between its
// QKV projection and its output projection: it reads each position's
// queries, keys and values side by side (B·T rows of 3C) and gives (B·T, C),
// every head attending to the positions up to its own. It has no
// parameters; it needs the engine's compute.Attention.
type CausalSelfAttention struct {
	name         string
	t, c, heads  int
	plan         compute.AttentionPlan
	qkv, y, dqkv compute.Tensor
}

var _ Layer = (*CausalSelfAttention)(nil)

// NewCausalSelfAttention returns attention over sequences of context
// positions, width c split into heads heads.
func NewCausalSelfAttention(name string, context, c, heads int) *CausalSelfAttention {
	return &CausalSelfAttention{name: name, t: context, c: c, heads: heads}
}

// Params is empty.
func (a *CausalSelfAttention) Params() []ParamSpec { return nil }

// Name is the layer's name.
func (a *CausalSelfAttention) Name() string { return a.name }

// Context is the length of the sequences the layer attends within: its
// rows are split into sequences of Context positions.
func (a *CausalSelfAttention) Context() int { return a.t }

// Build checks the shapes, prepares the engine's attention plan for
// Batch/T sequences (Batch counts rows, one per position) and allocates y
// and dqkv.
func (a *CausalSelfAttention) Build(b Build) ([]int, error) {
	if a.heads <= 0 || a.c%a.heads != 0 {
		return nil, fmt.Errorf("%s: %d heads do not divide the width %d", a.name, a.heads, a.c)
	}
	if size(b.In) != 3*a.c {
		return nil, fmt.Errorf("%s: input of shape %v, want 3x%d (queries, keys, values)", a.name, b.In, a.c)
	}
	if b.Batch%a.t != 0 {
		return nil, fmt.Errorf("%s: %d rows are not whole sequences of %d positions", a.name, b.Batch, a.t)
	}
	at, err := compute.Require[compute.Attention](b.Engine, "causal attention")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	spec := a.spec(b)
	plan, err := SharedPlan(b, spec, func() (compute.AttentionPlan, error) { return at.CausalAttention(spec) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	a.plan = plan
	if b.bf16 {
		if p, ok := plan.(interface{ Path() string }); ok {
			b.note(p.Path())
		}
		a.y, a.dqkv = b.allocBF16(a.c), b.allocGradBF16(3*a.c)
		return []int{a.c}, nil
	}
	a.y = b.Alloc(b.Batch, a.c)
	a.dqkv = b.Alloc(b.Batch, 3*a.c)
	return []int{a.c}, nil
}

// spec is the layer's attention for b: bf16 in a bf16 build.
func (a *CausalSelfAttention) spec(b Build) compute.AttentionSpec {
	s := compute.AttentionSpec{B: b.Batch / a.t, T: a.t, C: a.c, Heads: a.heads}
	if b.bf16 {
		s.DType = compute.BF16
	}
	return s
}

// checkBF16 asks the engine for the bf16 attention plan (bf16Layer).
func (a *CausalSelfAttention) checkBF16(b Build) ([]int, error) {
	if size(b.In) != 3*a.c || a.heads <= 0 || a.c%a.heads != 0 || b.Batch%a.t != 0 {
		return nil, fmt.Errorf("%s: input of shape %v, %d heads over %d, %d rows of sequences of %d", a.name, b.In, a.heads, a.c, b.Batch, a.t)
	}
	if _, err := compute.Require[compute.Attention](b.Engine, "causal attention"); err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	if err := compute.CheckBF16(b.Engine, a.spec(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	return []int{a.c}, nil
}

// Forward computes the attention of qkv (B·T, 3C) into y (B·T, C).
func (a *CausalSelfAttention) Forward(qkv compute.Tensor) compute.Tensor {
	a.qkv = qkv
	a.plan.Forward(a.y, qkv)
	return a.y
}

// Backward returns dqkv (B·T, 3C) from dy (B·T, C).
func (a *CausalSelfAttention) Backward(dy compute.Tensor) compute.Tensor {
	a.plan.Backward(a.dqkv, dy, a.qkv)
	return a.dqkv
}
