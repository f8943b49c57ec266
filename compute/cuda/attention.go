package cuda

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
)

var _ compute.Attention = (*Engine)(nil)

// CausalAttention returns the plan of attention over s (a bf16 spec's is
// attention_bf16.go's). In fp32, at a head size up to 64, it is the flash
// kernel (flashAttention, attention_f32.go: each row's log-sum-exp
// (B,Heads,T) in memory, the probabilities never); at larger head sizes
// the GEMM plan (attentionPlan), which allocates the probabilities
// (B,Heads,T,T) that Backward reads. Either makes sure the engine's
// scratch for the backward (shared by the plans, which run one after the
// other on the stream) has its size. It fails when a dimension is below 1,
// C is not a multiple of Heads, or a size does not fit the kernels' or
// cuBLAS's int or the memory.
func (e *Engine) CausalAttention(s compute.AttentionSpec) (compute.AttentionPlan, error) {
	switch s.DType {
	case compute.BF16:
		return e.attentionBF16Plan(s) // attention_bf16.go
	case compute.F32:
	default:
		return nil, fmt.Errorf("cuda: causal attention of %v", s.DType)
	}
	if s.B < 1 || s.T < 1 || s.C < 1 || s.Heads < 1 || s.C%s.Heads != 0 {
		return nil, fmt.Errorf("cuda: causal attention %+v: want B, T, C, Heads >= 1 with C a multiple of Heads", s)
	}
	if 3*s.C > math.MaxInt32 || s.T > math.MaxInt32 || s.B > math.MaxInt32 || s.Heads > math.MaxInt32 ||
		s.T > math.MaxInt64/4/s.T/s.B/s.Heads {
		return nil, fmt.Errorf("cuda: causal attention %+v: sizes past cuBLAS's int or the memory's", s)
	}
	hs := s.C / s.Heads
	if hs <= flashF32MaxHeadSize {
		return &flashAttention{flashF32: e.newFlashF32(s.B, s.T, s.Heads, s.Heads, hs), s: s}, nil
	}
	n := s.B * s.Heads * s.T * s.T
	p := &attentionPlan{
		e:     e,
		s:     s,
		hs:    hs,
		scale: float32(1 / math.Sqrt(float64(hs))),
		att:   e.Alloc(n).(*Tensor),
	}
	if e.attnGrad == nil || e.attnGrad.size < n {
		e.attnGrad = e.Alloc(n).(*Tensor)
	}
	// cuBLAS batches take one stride: the products run per sequence over
	// its heads, or per head over the sequences, whichever is fewer calls.
	T, C, H := s.T, s.C, s.Heads
	if s.B <= H {
		p.loop = attnLoop{n: s.B, batch: H, qkv: T * 3 * C, out: T * C, att: H * T * T, qkvStride: hs, outStride: hs, attStride: T * T}
	} else {
		p.loop = attnLoop{n: H, batch: s.B, qkv: hs, out: hs, att: T * T, qkvStride: T * 3 * C, outStride: T * C, attStride: H * T * T}
	}
	p.gemms = newCausalGemms(e, T, hs, p.loop.batch)
	return p, nil
}

// attnLoop is how a plan's products are laid out: n calls of batch products
// each; call u's first product starts u·qkv elements into qkv (and dqkv),
// u·out into out (and dout) and u·att into the probabilities (and their
// gradient), the next products the strides further.
type attnLoop struct {
	n, batch                        int
	qkv, out, att                   int
	qkvStride, outStride, attStride int
}

// attentionPlan is causal self-attention for one shape at a head size
// above 64 (flashAttention takes those up to 64), per sequence
// and head as the CPU engine's: S = Q·Kᵀ/√hs by strided-batched SGEMM,
// reading Q and K straight out of qkv with a leading dimension of 3C; P = causal
// softmax of S in place (sdc_softmax_causal, the CPU engine's bits for the
// same S); out = P·V. The products are cuBLAS's (fp32, no TF32), by
// blocks that skip the squares' upper triangles (causalGemms). A plan
// allocates nothing per call and can be captured.
type attentionPlan struct {
	e     *Engine
	s     compute.AttentionSpec
	hs    int
	scale float32
	att   *Tensor // (B,Heads,T,T): the last Forward's probabilities, zero above the diagonal
	loop  attnLoop
	gemms causalGemms
}

// packedTensors is an fp32 attention plan of s's check of a call's
// tensors: qkv (or dqkv) (B,T,3C) and out (or dout) (B,T,C), apart.
func (e *Engine) packedTensors(op string, s compute.AttentionSpec, wide, narrow compute.Tensor) (wd, nd *Tensor) {
	wd, nd = e.tensorOf(op, wide), e.tensorOf(op, narrow)
	ws, ns := wd.shape, nd.shape
	if wd.size != s.B*s.T*3*s.C || ws[len(ws)-1] != 3*s.C || nd.size != s.B*s.T*s.C || ns[len(ns)-1] != s.C {
		compute.PanicShapes("cuda", op, fmt.Sprintf("want (B,T,3C) and (B,T,C) for B=%d T=%d C=%d", s.B, s.T, s.C), ws, ns)
	}
	if overlap(wd, nd) {
		compute.PanicShapes("cuda", op, "the tensors overlap", ws, ns)
	}
	return wd, nd
}

// at is the device address off elements past base.
func at(base uintptr, off int) uintptr { return base + 4*uintptr(off) }

// Forward computes out (B,T,C) from qkv (B,T,3C) and keeps the
// probabilities for Backward.
func (p *attentionPlan) Forward(out, qkv compute.Tensor) {
	const op = "attention Forward"
	qd, od := p.e.packedTensors(op, p.s, qkv, out)
	e, l, g := p.e, p.loop, p.gemms
	T, C := p.s.T, p.s.C
	for u := 0; u < l.n; u++ {
		q, a := at(qd.ptr, u*l.qkv), at(p.att.ptr, u*l.att)
		// S (T,T) = scale · Q · Kᵀ, each head's
		g.rowsABt(op, p.scale, q, 3*C, l.qkvStride, at(q, C), 3*C, l.qkvStride, a, l.attStride)
	}
	e.fail(op, e.dev.SoftmaxCausal(p.att.ptr, p.s.B*p.s.Heads, T))
	for u := 0; u < l.n; u++ {
		v, a := at(qd.ptr, u*l.qkv+2*C), at(p.att.ptr, u*l.att)
		// out (T,hs) = P · V
		g.rowsPB(op, 1, a, l.attStride, v, 3*C, l.qkvStride, at(od.ptr, u*l.out), C, l.outStride)
	}
}

// Backward writes dqkv (B,T,3C) from dout (B,T,C), using the probabilities
// of the last Forward (which must have run on this qkv): dP = dO·Vᵀ and
// dV = Pᵀ·dO, the softmax's backward dS = P∘(dP - rowsum(P∘dP)) in place
// (sdc_softmax_causal_backward), dQ = scale·dS·K and dK = scale·dSᵀ·Q.
// Every part of dqkv is written (beta 0).
func (p *attentionPlan) Backward(dqkv, dout, qkv compute.Tensor) {
	const op = "attention Backward"
	dqd, dod := p.e.packedTensors(op, p.s, dqkv, dout)
	qd, _ := p.e.packedTensors(op, p.s, qkv, dout)
	if overlap(dqd, qd) {
		compute.PanicShapes("cuda", op, "dqkv overlaps qkv", dqd.shape, qd.shape)
	}
	e, l, gm := p.e, p.loop, p.gemms
	T, C := p.s.T, p.s.C
	g := e.attnGrad.ptr
	for u := 0; u < l.n; u++ {
		v, dv := at(qd.ptr, u*l.qkv+2*C), at(dqd.ptr, u*l.qkv+2*C)
		do, a, ga := at(dod.ptr, u*l.out), at(p.att.ptr, u*l.att), at(g, u*l.att)
		// dP (T,T) = dO · Vᵀ
		gm.rowsABt(op, 1, do, C, l.outStride, v, 3*C, l.qkvStride, ga, l.attStride)
		// dV (T,hs) = Pᵀ · dO
		gm.colsPtB(op, 1, a, l.attStride, do, C, l.outStride, 0, dv, 3*C, l.qkvStride)
	}
	e.fail(op, e.dev.SoftmaxCausalBackward(g, p.att.ptr, p.s.B*p.s.Heads, T))
	for u := 0; u < l.n; u++ {
		q, dq, ga := at(qd.ptr, u*l.qkv), at(dqd.ptr, u*l.qkv), at(g, u*l.att)
		// dQ (T,hs) = scale · dS · K
		gm.rowsPB(op, p.scale, ga, l.attStride, at(q, C), 3*C, l.qkvStride, dq, 3*C, l.qkvStride)
		// dK (T,hs) = scale · dSᵀ · Q
		gm.colsPtB(op, p.scale, ga, l.attStride, q, 3*C, l.qkvStride, 0, at(dq, C), 3*C, l.qkvStride)
	}
}
