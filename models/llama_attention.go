package models

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// GroupedSelfAttention is Llama's attention layer: bias-free projections
// q_proj (H·hs,C), k_proj and v_proj (KVH·hs,C), the rotary embedding of
// queries and keys, causal attention in which groups of H/KVH query heads
// share a key/value head, and o_proj (C,H·hs). Its parameters are named as
// Hugging Face's LlamaAttention names them (name+".q_proj.weight", ...).
// It needs the engine's compute.Rotary and compute.GroupedAttention.
type GroupedSelfAttention struct {
	name                string
	t, c, heads, kv, hs int
	theta               float64
	qp, kp, vp, op      *Linear
	e                   compute.Engine
	rope                compute.RotaryPlan
	plan                compute.GroupedAttentionPlan
	qr, kr, att         compute.Tensor // rotated queries and keys, attention's output
	dq, dk, dv          compute.Tensor
	needInGrad          bool
}

var _ Layer = (*GroupedSelfAttention)(nil)

// NewGroupedSelfAttention returns attention over sequences of context
// positions of width c, with heads query heads and kvHeads key/value heads
// of c/heads channels and the rotary base theta; the weights are N(0,
// std²), o_proj's N(0, outStd²).
func NewGroupedSelfAttention(name string, context, c, heads, kvHeads int, theta, std, outStd float64) *GroupedSelfAttention {
	if context <= 0 || c <= 0 || heads <= 0 || kvHeads <= 0 || c%heads != 0 {
		panic(fmt.Sprintf("models: NewGroupedSelfAttention(%q): context %d, width %d, heads %d, kv heads %d", name, context, c, heads, kvHeads))
	}
	hs := c / heads
	return &GroupedSelfAttention{name: name, t: context, c: c, heads: heads, kv: kvHeads, hs: hs, theta: theta,
		qp: normalLinear(name+".q_proj", c, heads*hs, std),
		kp: normalLinear(name+".k_proj", c, kvHeads*hs, std),
		vp: normalLinear(name+".v_proj", c, kvHeads*hs, std),
		op: normalLinear(name+".o_proj", heads*hs, c, outStd)}
}

// Params declares q_proj, k_proj, v_proj and o_proj's weights.
func (a *GroupedSelfAttention) Params() []ParamSpec {
	var p []ParamSpec
	for _, l := range []*Linear{a.qp, a.kp, a.vp, a.op} {
		p = append(p, l.Params()...)
	}
	return p
}

// Build asks the engine for the rotary embedding and grouped attention,
// prepares both for Batch/T sequences (Batch counts rows, one per
// position), builds the projections and allocates the activations.
func (a *GroupedSelfAttention) Build(b Build) ([]int, error) {
	if size(b.In) != a.c {
		return nil, fmt.Errorf("%s: input of shape %v, want %d features", a.name, b.In, a.c)
	}
	if b.Batch%a.t != 0 {
		return nil, fmt.Errorf("%s: %d rows are not whole sequences of %d positions", a.name, b.Batch, a.t)
	}
	if err := checkViews(a.name, a.Params(), b.Params, b.Grads); err != nil {
		return nil, err
	}
	ro, err := compute.Require[compute.Rotary](b.Engine, "rotary embedding")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	ga, err := compute.Require[compute.GroupedAttention](b.Engine, "grouped-query attention")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	rs := compute.RotarySpec{T: a.t, HeadSize: a.hs, Theta: a.theta}
	if a.rope, err = SharedPlan(b, rs, func() (compute.RotaryPlan, error) { return ro.RotaryEmbedding(rs) }); err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	spec := a.spec(b)
	a.plan, err = SharedPlan(b, spec, func() (compute.GroupedAttentionPlan, error) { return ga.GroupedCausalAttention(spec) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.name, err)
	}
	a.kp.addDXOf, a.vp.addDXOf = nil, nil
	if b.bf16 {
		// k_proj and v_proj add their input gradients to q_proj's
		a.kp.addDXOf, a.vp.addDXOf = a.qp, a.qp
		if p, ok := a.plan.(interface{ Path() string }); ok {
			b.note(p.Path())
		}
	}
	for i, l := range []*Linear{a.qp, a.kp, a.vp, a.op} {
		if _, err := l.Build(a.part(b, i)); err != nil {
			return nil, err
		}
	}
	r, qw, kw := b.Batch, a.heads*a.hs, a.kv*a.hs
	a.e, a.needInGrad = b.Engine, b.NeedInputGrad
	if b.bf16 {
		a.qr, a.kr, a.att = b.allocBF16(qw), b.allocBF16(kw), b.allocBF16(qw)
		a.dq, a.dk, a.dv = b.allocGradBF16(qw), b.allocGradBF16(kw), b.allocGradBF16(kw)
		return []int{a.c}, nil
	}
	a.qr, a.kr, a.att = b.Alloc(r, qw), b.Alloc(r, kw), b.Alloc(r, qw)
	a.dq, a.dk, a.dv = b.Alloc(r, qw), b.Alloc(r, kw), b.Alloc(r, kw)
	return []int{a.c}, nil
}

// spec is the layer's attention for b: bf16 in a bf16 build.
func (a *GroupedSelfAttention) spec(b Build) compute.GroupedAttentionSpec {
	s := compute.GroupedAttentionSpec{B: b.Batch / a.t, T: a.t, Heads: a.heads, KVHeads: a.kv, HeadSize: a.hs}
	if b.bf16 {
		s.DType = compute.BF16
	}
	return s
}

// part is projection i's (q, k, v, o) part of b: o_proj takes the heads'
// width and ends a residual block when the layer does.
func (a *GroupedSelfAttention) part(b Build, i int) Build {
	if i < 3 {
		return b.part(b.In, i, i+1, b.NeedInputGrad)
	}
	p := b.part([]int{a.heads * a.hs}, 3, 4, true)
	p.onto, p.keep = b.onto, b.keep
	return p
}

// checkBF16 asks the engine for the rotary embedding, grouped attention
// and the four projections in bf16, k_proj and v_proj adding their input
// gradients to q_proj's and o_proj ending a residual block when the layer
// does (bf16Layer).
func (a *GroupedSelfAttention) checkBF16(b Build) ([]int, error) {
	if size(b.In) != a.c || b.Batch%a.t != 0 {
		return nil, fmt.Errorf("%s: input of shape %v, %d rows of sequences of %d", a.name, b.In, b.Batch, a.t)
	}
	for _, err := range []error{
		require[compute.Rotary](b.Engine, "rotary embedding"),
		require[compute.GroupedAttention](b.Engine, "grouped-query attention"),
		compute.CheckBF16(b.Engine, compute.RotarySpec{T: a.t, HeadSize: a.hs, Theta: a.theta}),
		compute.CheckBF16(b.Engine, a.spec(b)),
	} {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.name, err)
		}
	}
	a.kp.addDXOf, a.vp.addDXOf = a.qp, a.qp
	for i, l := range []*Linear{a.qp, a.kp, a.vp, a.op} {
		if _, err := l.checkBF16(a.part(b, i)); err != nil {
			return nil, err
		}
	}
	return []int{a.c}, nil
}

// forwardOnto computes r + o_proj(attention(...)) (streamOut: a bf16 layer
// built to end a residual block).
func (a *GroupedSelfAttention) forwardOnto(x, r compute.Tensor) compute.Tensor {
	return a.op.forwardOnto(a.attend(x), r)
}

// Forward computes o_proj(attention(rope(q_proj(x)), rope(k_proj(x)),
// v_proj(x))) for x (B·T, C).
func (a *GroupedSelfAttention) Forward(x compute.Tensor) compute.Tensor {
	return a.op.Forward(a.attend(x))
}

// attend is the layer up to o_proj: attention of the rotated projections.
func (a *GroupedSelfAttention) attend(x compute.Tensor) compute.Tensor {
	a.rope.Forward(a.qr, a.qp.Forward(x))
	a.rope.Forward(a.kr, a.kp.Forward(x))
	a.plan.Forward(a.att, a.qr, a.kr, a.vp.Forward(x))
	return a.att
}

// endsStream: dy goes to o_proj alone, whose output is the layer's
// (streamEnd).
func (a *GroupedSelfAttention) endsStream() bool { return a.op.endsStream() }

// Backward writes the four weights' gradients and returns dx (B·T, C), the
// sum of what goes through the three input projections.
func (a *GroupedSelfAttention) Backward(dy compute.Tensor) compute.Tensor {
	datt := a.op.Backward(dy)
	a.plan.Backward(a.dq, a.dk, a.dv, datt, a.qr, a.kr, a.vp.y)
	a.rope.Backward(a.dq, a.dq)
	a.rope.Backward(a.dk, a.dk)
	dx := a.qp.Backward(a.dq)
	dxk := a.kp.Backward(a.dk) // in bf16 added to q_proj's, in its GEMM
	dxv := a.vp.Backward(a.dv)
	if !a.needInGrad {
		return nil
	}
	if a.kp.addDXOf == nil {
		a.e.Accumulate(dx, dxk)
		a.e.Accumulate(dx, dxv)
	}
	return dx
}
