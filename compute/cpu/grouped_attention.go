package cpu

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

var _ compute.GroupedAttention = (*Engine)(nil)

// GroupedCausalAttention returns the plan of grouped-query attention over
// s: it allocates the probabilities (B,Heads,T,T), which Backward reads,
// and the backward's scratch. It fails when a dimension is below 1 or
// Heads is not a multiple of KVHeads.
func (e *Engine) GroupedCausalAttention(s compute.GroupedAttentionSpec) (compute.GroupedAttentionPlan, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	if s.DType != compute.F32 {
		return nil, &compute.MissingOpError{Engine: e.Name(), Op: fmt.Sprintf("%v grouped-query attention", s.DType), Group: "BF16Tensors"}
	}
	return &groupedPlan{
		s:    s,
		head: newAttnHead(e.blas, s.T, s.HeadSize),
		att:  make([]float32, s.B*s.Heads*s.T*s.T),
	}, nil
}

// groupedPlan is grouped-query attention for one shape, per sequence and
// query head as attentionPlan's: query head h reads key/value head
// h/(Heads/KVHeads) straight out of the packed qkv (every row Width()
// elements), so a group's query heads read the same memory. Backward runs a
// group's query heads in order: the first overwrites its key/value head's
// gradients, the others add to them.
type groupedPlan struct {
	s    compute.GroupedAttentionSpec
	head attnHead
	// att is (B,Heads,T,T): the softmax probabilities of the last Forward.
	att []float32
}

// check returns the memory of qkv (or its gradient), (B,T,Width()), and of
// out (or its gradient), (B,T,Heads·hs), and panics unless they have those
// sizes and do not overlap.
func (p *groupedPlan) check(op string, qkv, out compute.Tensor) (qd, od []float32) {
	s := p.s
	qd, od = data(op, qkv), data(op, out)
	w, qw, rows := s.Width(), s.Heads*s.HeadSize, s.B*s.T
	last := func(t compute.Tensor) int { sh := t.Shape(); return sh[len(sh)-1] }
	if len(qd) != rows*w || last(qkv) != w || len(od) != rows*qw || last(out) != qw {
		compute.PanicShapes("cpu", op, fmt.Sprintf("want qkv (B,T,%d) and out (B,T,%d) for B=%d T=%d", w, qw, s.B, s.T),
			qkv.Shape(), out.Shape())
	}
	if overlap(qd, od) {
		compute.PanicShapes("cpu", op, "the tensors overlap", qkv.Shape(), out.Shape())
	}
	return qd, od
}

// Forward computes out from qkv and keeps the probabilities.
func (p *groupedPlan) Forward(out, qkv compute.Tensor) {
	qd, od := p.check("grouped attention Forward", qkv, out)
	T, H, hs := p.s.T, p.s.Heads, p.s.HeadSize
	ld, ldo, ko, vo := p.s.Width(), H*hs, H*hs, (H+p.s.KVHeads)*hs
	for b := 0; b < p.s.B; b++ {
		for h := 0; h < H; h++ {
			j := p.s.KVHead(h)
			att := p.att[(b*H+h)*T*T : (b*H+h+1)*T*T]
			row := b * T * ld
			p.head.forward(att, qd[row+h*hs:], ld, qd[row+ko+j*hs:], qd[row+vo+j*hs:], ld, od[b*T*ldo+h*hs:], ldo)
		}
	}
}

// Backward writes dqkv from dout, using the probabilities of the last
// Forward (which must have run on this qkv).
func (p *groupedPlan) Backward(dqkv, dout, qkv compute.Tensor) {
	const op = "grouped attention Backward"
	qd, dod := p.check(op, qkv, dout)
	dqd, _ := p.check(op, dqkv, dout)
	if overlap(dqd, qd) {
		compute.PanicShapes("cpu", op, "dqkv overlaps qkv", dqkv.Shape(), qkv.Shape())
	}
	T, H, hs := p.s.T, p.s.Heads, p.s.HeadSize
	ld, ldo, ko, vo := p.s.Width(), H*hs, H*hs, (H+p.s.KVHeads)*hs
	for b := 0; b < p.s.B; b++ {
		for h := 0; h < H; h++ {
			j := p.s.KVHead(h)
			row, qo, kvo := b*T*ld, h*hs, j*hs
			att := p.att[(b*H+h)*T*T : (b*H+h+1)*T*T]
			p.head.backward(att, qd[row+qo:], ld, qd[row+ko+kvo:], qd[row+vo+kvo:], ld, dod[b*T*ldo+h*hs:], ldo,
				dqd[row+qo:], dqd[row+ko+kvo:], dqd[row+vo+kvo:], p.s.FirstOfGroup(h))
		}
	}
}
