package models

import (
	"fmt"
	"slices"
	"strings"

	"github.com/symddp/symddp/compute"
)

// GroupedSelfAttention is Llama's attention layer: bias-free projections
// q_proj (H·hs,C), k_proj and v_proj (KVH·hs,C), the rotary embedding of
// queries and keys, causal attention in which groups of H/KVH query heads
// share a key/value head, and o_proj (C,H·hs). Its parameters are named as
// Hugging Face's LlamaAttention names them (name+".q_proj.weight", ...).
//
// q_proj, k_proj and v_proj are declared apart (their names, shapes and
// initialisation) but run as one Linear over their weights joined
// (compute.Joiner: the trainer lays them out back to back): one GEMM writes
// the packed queries, keys and values ((B,T,(H+2·KVH)·hs), the layout of
// compute.GroupedAttentionPlan), one rotation turns the query and key heads
// at the front of each row in place, and the backward is one GEMM for the
// three weights' gradients and one for the input gradient. It needs the
// engine's compute.Rotary, compute.GroupedAttention and compute.Joiner.
type GroupedSelfAttention struct {
	name                string
	t, c, heads, kv, hs int
	theta               float64
	specs               []ParamSpec // q_proj, k_proj and v_proj's weights
	qkv, op             *Linear     // qkv: the three projections as one
	e                   compute.Engine
	rope                compute.RotaryPlan
	plan                compute.GroupedAttentionPlan
	att, dqkv           compute.Tensor // attention's output, the gradient at the packed qkv
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
	a := &GroupedSelfAttention{name: name, t: context, c: c, heads: heads, kv: kvHeads, hs: hs, theta: theta,
		qkv: normalLinear(name+".qkv", c, (heads+2*kvHeads)*hs, std),
		op:  normalLinear(name+".o_proj", heads*hs, c, outStd)}
	for _, l := range []*Linear{normalLinear(name+".q_proj", c, heads*hs, std),
		normalLinear(name+".k_proj", c, kvHeads*hs, std), normalLinear(name+".v_proj", c, kvHeads*hs, std)} {
		a.specs = append(a.specs, l.Params()...)
	}
	return a
}

// Name is the layer's name.
func (a *GroupedSelfAttention) Name() string { return a.name }

// Context is the length of the sequences the layer attends within (and
// rotates positions of): its rows are split into sequences of Context
// positions.
func (a *GroupedSelfAttention) Context() int { return a.t }

// Params declares q_proj, k_proj, v_proj and o_proj's weights.
func (a *GroupedSelfAttention) Params() []ParamSpec {
	return append(slices.Clone(a.specs), a.op.Params()...)
}

// Build asks the engine for the rotary embedding and grouped attention,
// prepares both for Batch/T sequences (Batch counts rows, one per
// position), builds the joined projection and o_proj and allocates the
// activations.
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
	if b.bf16 {
		if p, ok := a.plan.(interface{ Path() string }); ok {
			b.note(p.Path())
		}
	}
	qb, err := a.joined(b)
	if err != nil {
		return nil, err
	}
	if _, err := a.qkv.Build(qb); err != nil {
		return nil, err
	}
	if _, err := a.op.Build(a.outBuild(b)); err != nil {
		return nil, err
	}
	a.e, a.needInGrad = b.Engine, b.NeedInputGrad
	if b.bf16 {
		a.att, a.dqkv = b.allocBF16(a.heads*a.hs), b.allocGradBF16(spec.Width())
		return []int{a.c}, nil
	}
	a.att, a.dqkv = b.Alloc(b.Batch, a.heads*a.hs), b.Alloc(b.Batch, spec.Width())
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

// joined is the Build of the joined projection: q_proj, k_proj and v_proj's
// weights as one ((H+2·KVH)·hs, C) matrix (joinedBuild).
func (a *GroupedSelfAttention) joined(b Build) (Build, error) {
	return joinedBuild(b, a.name, a.specs, []int{(a.heads + 2*a.kv) * a.hs, a.c})
}

// joinedBuild is the Build of one Linear over b's first len(specs)
// parameters joined (compute.Joiner): their weights, their gradients and
// (bf16) their bf16 copies each viewed as one matrix of shape, the rows of
// one after the other's; or an error saying why they cannot be (tied, or
// not back to back in one arena).
func joinedBuild(b Build, layer string, specs []ParamSpec, shape []int) (Build, error) {
	p := b.part(b.In, 0, len(specs), b.NeedInputGrad)
	names := make([]string, len(specs))
	for k, s := range specs {
		if p.AddGrad(k) {
			return p, fmt.Errorf("%s: %s is tied to another parameter, which a joined projection does not take", layer, s.Name)
		}
		names[k] = s.Name
	}
	j, err := compute.Require[compute.Joiner](b.Engine, "joined parameter views")
	if err != nil {
		return p, fmt.Errorf("%s: %w", layer, err)
	}
	join := func(ts []compute.Tensor) (compute.Tensor, error) {
		if t := j.Join(shape, ts...); t != nil {
			return t, nil
		}
		return nil, fmt.Errorf("%s: the weights %s do not lie back to back in one arena, in that order, "+
			"as the trainer lays out a model's parameters (models.Layout); lay them out so to build this layer",
			layer, strings.Join(names, ", "))
	}
	w, err := join(p.Params)
	if err != nil {
		return p, err
	}
	g, err := join(p.Grads)
	if err != nil {
		return p, err
	}
	p.Params, p.Grads, p.AddGrads = []compute.Tensor{w}, []compute.Tensor{g}, nil
	if p.half != nil {
		h, err := join(p.half)
		if err != nil {
			return p, err
		}
		p.half = []compute.Tensor{h}
	}
	return p, nil
}

// outBuild is o_proj's part of b: the heads' width in, ending a residual
// block when the layer does.
func (a *GroupedSelfAttention) outBuild(b Build) Build {
	p := b.part([]int{a.heads * a.hs}, 3, 4, true)
	p.onto, p.keep = b.onto, b.keep
	return p
}

// checkBF16 asks the engine for the rotary embedding, grouped attention
// and the two projections in bf16, o_proj ending a residual block when the
// layer does (bf16Layer).
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
	qb, err := a.joined(b)
	if err != nil {
		return nil, err
	}
	if _, err := a.qkv.checkBF16(qb); err != nil {
		return nil, err
	}
	if _, err := a.op.checkBF16(a.outBuild(b)); err != nil {
		return nil, err
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

// attend is the layer up to o_proj: the joined projection, its query and
// key heads rotated in place, attention.
func (a *GroupedSelfAttention) attend(x compute.Tensor) compute.Tensor {
	qkv := a.qkv.Forward(x)
	a.rope.Forward(qkv, a.heads+a.kv)
	a.plan.Forward(a.att, qkv)
	return a.att
}

// endsStream: dy goes to o_proj alone, whose output is the layer's
// (streamEnd).
func (a *GroupedSelfAttention) endsStream() bool { return a.op.endsStream() }

// Backward writes the four weights' gradients and returns dx (B·T, C), the
// sum of what goes through the three input projections (one GEMM).
func (a *GroupedSelfAttention) Backward(dy compute.Tensor) compute.Tensor {
	datt := a.op.Backward(dy)
	a.plan.Backward(a.dqkv, datt, a.qkv.y)
	a.rope.Backward(a.dqkv, a.heads+a.kv)
	return a.qkv.Backward(a.dqkv)
}
