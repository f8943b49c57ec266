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
// h/(Heads/KVHeads) straight out of k and v (leading dimension
// KVHeads·hs), so a group's query heads read the same memory. Backward
// runs a group's query heads in order: the first overwrites its key/value
// head's gradients, the others add to them.
type groupedPlan struct {
	s    compute.GroupedAttentionSpec
	head attnHead
	// att is (B,Heads,T,T): the softmax probabilities of the last Forward.
	att []float32
}

// check returns the memory of q and out (or their gradients), (B,T,H·hs),
// and of k and v, (B,T,KVH·hs), and panics unless they have those sizes
// and none overlaps another.
func (p *groupedPlan) check(op string, q, out, k, v compute.Tensor) (qd, od, kd, vd []float32) {
	s := p.s
	qd, od, kd, vd = data(op, q), data(op, out), data(op, k), data(op, v)
	qw, kw := s.Heads*s.HeadSize, s.KVHeads*s.HeadSize
	rows := s.B * s.T
	last := func(t compute.Tensor) int { sh := t.Shape(); return sh[len(sh)-1] }
	if len(qd) != rows*qw || last(q) != qw || len(od) != rows*qw || last(out) != qw ||
		len(kd) != rows*kw || last(k) != kw || len(vd) != rows*kw || last(v) != kw {
		compute.PanicShapes("cpu", op, fmt.Sprintf("want q and out (B,T,%d), k and v (B,T,%d) for B=%d T=%d", qw, kw, s.B, s.T),
			q.Shape(), out.Shape(), k.Shape(), v.Shape())
	}
	if anyOverlap(od, qd, kd, vd) || anyOverlap(qd, kd, vd) || overlap(kd, vd) {
		compute.PanicShapes("cpu", op, "the tensors overlap", q.Shape(), out.Shape(), k.Shape(), v.Shape())
	}
	return qd, od, kd, vd
}

// Forward computes out from q, k and v and keeps the probabilities.
func (p *groupedPlan) Forward(out, q, k, v compute.Tensor) {
	qd, od, kd, vd := p.check("grouped attention Forward", q, out, k, v)
	T, H, hs := p.s.T, p.s.Heads, p.s.HeadSize
	ldq, ldkv := H*hs, p.s.KVHeads*hs
	for b := 0; b < p.s.B; b++ {
		for h := 0; h < H; h++ {
			j := p.s.KVHead(h)
			att := p.att[(b*H+h)*T*T : (b*H+h+1)*T*T]
			p.head.forward(att, qd[b*T*ldq+h*hs:], ldq, kd[b*T*ldkv+j*hs:], vd[b*T*ldkv+j*hs:], ldkv, od[b*T*ldq+h*hs:], ldq)
		}
	}
}

// Backward writes dq, dk and dv from dout, using the probabilities of the
// last Forward (which must have run on these q, k, v).
func (p *groupedPlan) Backward(dq, dk, dv, dout, q, k, v compute.Tensor) {
	const op = "grouped attention Backward"
	qd, dod, kd, vd := p.check(op, q, dout, k, v)
	dqd, _, dkd, dvd := p.check(op, dq, dout, dk, dv)
	for _, d := range [][]float32{dqd, dkd, dvd} {
		if anyOverlap(d, qd, kd, vd) {
			compute.PanicShapes("cpu", op, "a gradient overlaps q, k or v", dq.Shape(), dk.Shape(), dv.Shape())
		}
	}
	T, H, hs := p.s.T, p.s.Heads, p.s.HeadSize
	ldq, ldkv := H*hs, p.s.KVHeads*hs
	for b := 0; b < p.s.B; b++ {
		for h := 0; h < H; h++ {
			j := p.s.KVHead(h)
			qo, ko := b*T*ldq+h*hs, b*T*ldkv+j*hs
			att := p.att[(b*H+h)*T*T : (b*H+h+1)*T*T]
			p.head.backward(att, qd[qo:], ldq, kd[ko:], vd[ko:], ldkv, dod[qo:], ldq, dqd[qo:], dkd[ko:], dvd[ko:], p.s.FirstOfGroup(h))
		}
	}
}
