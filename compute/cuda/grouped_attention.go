package cuda

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
)

var _ compute.GroupedAttention = (*Engine)(nil)

// GroupedCausalAttention returns the plan of grouped-query attention over
// s (DType BF16: flash attention, grouped_attention_bf16.go). In fp32, at
// a head size up to 64, it is the flash kernel (flashGrouped,
// attention_f32.go: each row's log-sum-exp (B,Heads,T) in memory, the
// probabilities never); at larger head sizes the GEMM plan (groupedPlan),
// which allocates the probabilities (B,Heads,T,T) that Backward reads.
// Either makes sure the engine's scratch for the backward (shared with the
// multi-head plans: they run one after the other on the stream) has its
// size. It fails when a dimension is below 1, Heads is not a
// multiple of KVHeads, or a size does not fit cuBLAS's int or the memory.
func (e *Engine) GroupedCausalAttention(s compute.GroupedAttentionSpec) (compute.GroupedAttentionPlan, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if s.DType == compute.BF16 {
		return e.groupedBF16Plan(s)
	}
	if s.Heads > math.MaxInt32/s.HeadSize || s.T > math.MaxInt32 || s.B > math.MaxInt32 ||
		s.T > math.MaxInt64/4/s.T/s.B/s.Heads {
		return nil, fmt.Errorf("cuda: grouped causal attention %+v: sizes past cuBLAS's int or the memory's", s)
	}
	B, T, H, KV, hs := s.B, s.T, s.Heads, s.KVHeads, s.HeadSize
	if hs <= flashF32MaxHeadSize {
		return &flashGrouped{flashF32: e.newFlashF32(B, T, H, KV, hs), s: s}, nil
	}
	g, qw, w := s.Group(), H*hs, s.Width()
	n := B * H * T * T
	p := &groupedPlan{
		e:     e,
		s:     s,
		scale: float32(1 / math.Sqrt(float64(hs))),
		att:   e.Alloc(n).(*Tensor),
	}
	if e.attnGrad == nil || e.attnGrad.size < n {
		e.attnGrad = e.Alloc(n).(*Tensor)
	}
	// A cuBLAS batch takes one stride, and query head h = j·g + r reads
	// key/value head j. Per sequence and group member r, the products of
	// the KV heads are one batch (query heads r, g+r, 2g+r, ...: a stride
	// of g heads in q and out, of one head in k and v); per query head, the
	// products of the B sequences are. Whichever is fewer calls. Either
	// way a key/value head's first query head (r = 0) comes before the
	// others of its group. Offsets of q and k are into qkv (v is KV heads
	// past k), those of out into out.
	if B <= KV {
		for b := 0; b < B; b++ {
			for r := 0; r < g; r++ {
				p.calls = append(p.calls, groupedCall{q: b*T*w + r*hs, o: b*T*qw + r*hs, k: b*T*w + qw, att: (b*H + r) * T * T, first: s.FirstOfGroup(r)})
			}
		}
		p.batch, p.qStride, p.oStride, p.kvStride, p.attStride = KV, g*hs, g*hs, hs, g*T*T
	} else {
		for h := 0; h < H; h++ {
			p.calls = append(p.calls, groupedCall{q: h * hs, o: h * hs, k: qw + s.KVHead(h)*hs, att: h * T * T, first: s.FirstOfGroup(h)})
		}
		p.batch, p.qStride, p.oStride, p.kvStride, p.attStride = B, T*w, T*qw, T*w, H*T*T
	}
	p.gemms = newCausalGemms(e, T, hs, p.batch)
	return p, nil
}

// groupedCall is one batch of a grouped plan's products: its first
// product's query head starts q elements into qkv (and dqkv), its output o
// into out (and dout), its key k into qkv (its value KVHeads·hs past it;
// the same into dqkv) and its probabilities att into the probabilities (and
// their gradient); first says its query heads are the first of their
// groups, whose dK and dV products overwrite (beta 0) where the others add
// (beta 1).
type groupedCall struct {
	q, o, k, att int
	first        bool
}

// groupedPlan is grouped-query attention for one shape at a head size
// above 64 (flashGrouped takes those up to 64), per query head as the
// multi-head plan's (attentionPlan): S = Q·Kᵀ/√hs by strided-batched SGEMM
// reading Q and K out of the packed qkv (leading dimension Width()) where
// they are, every query head of a group reading its key/value head's
// memory (no copy); P = causal softmax of S in place (sdc_softmax_causal,
// the CPU engine's bits for the same S); out = P·V. Backward sums a
// key/value head's gradients over its group's query heads in order of the
// member, beta 0 for the first and 1 after: the same order on every run,
// so the same bits. The products are cuBLAS's (fp32, no TF32), by blocks
// that skip the squares' upper triangles (causalGemms). A plan allocates
// nothing per call and can be captured.
type groupedPlan struct {
	e     *Engine
	s     compute.GroupedAttentionSpec
	scale float32
	att   *Tensor // (B,Heads,T,T): the last Forward's probabilities, zero above the diagonal
	calls []groupedCall
	// every call's batch products lie these strides apart
	batch, qStride, oStride, kvStride, attStride int
	gemms                                        causalGemms
}

// lastDim is t's last dimension.
func lastDim(t *Tensor) int { return t.shape[len(t.shape)-1] }

// groupedTensors is a grouped plan of s's check of a call's tensors, of
// element type dt: qkv (or its gradient) (B,T,Width()) and out (or its
// gradient) (B,T,Heads·hs), not overlapping.
func (e *Engine) groupedTensors(op string, s compute.GroupedAttentionSpec, dt compute.DType, qkv, out compute.Tensor) (qd, od *Tensor) {
	qd, od = e.typedOf(op, qkv, dt), e.typedOf(op, out, dt)
	w, qw, rows := s.Width(), s.Heads*s.HeadSize, s.B*s.T
	if qd.size != rows*w || lastDim(qd) != w || od.size != rows*qw || lastDim(od) != qw {
		compute.PanicShapes("cuda", op, fmt.Sprintf("want qkv (B,T,%d) and out (B,T,%d) for B=%d T=%d", w, qw, s.B, s.T),
			qd.shape, od.shape)
	}
	if overlap(qd, od) {
		compute.PanicShapes("cuda", op, "the tensors overlap", qd.shape, od.shape)
	}
	return qd, od
}

// Forward computes out from qkv and keeps the probabilities for Backward.
func (p *groupedPlan) Forward(out, qkv compute.Tensor) {
	const op = "grouped attention Forward"
	qd, od := p.e.groupedTensors(op, p.s, compute.F32, qkv, out)
	e, g := p.e, p.gemms
	T, hs := p.s.T, p.s.HeadSize
	ld, ldo, vo := p.s.Width(), p.s.Heads*hs, p.s.KVHeads*hs
	for _, c := range p.calls {
		// S (T,T) = scale · Q · Kᵀ
		g.rowsABt(op, p.scale, at(qd.ptr, c.q), ld, p.qStride, at(qd.ptr, c.k), ld, p.kvStride, at(p.att.ptr, c.att), p.attStride)
	}
	e.fail(op, e.dev.SoftmaxCausal(p.att.ptr, p.s.B*p.s.Heads, T))
	for _, c := range p.calls {
		// out (T,hs) = P · V
		g.rowsPB(op, 1, at(p.att.ptr, c.att), p.attStride, at(qd.ptr, c.k+vo), ld, p.kvStride, at(od.ptr, c.o), ldo, p.oStride)
	}
}

// Backward writes dqkv from dout, using the probabilities of the last
// Forward (which must have run on this qkv): dP = dO·Vᵀ and dV (+)= Pᵀ·dO,
// the softmax's backward dS = P∘(dP - rowsum(P∘dP)) in place
// (sdc_softmax_causal_backward), dQ = scale·dS·K and dK (+)= scale·dSᵀ·Q.
// Every element of dqkv is written.
func (p *groupedPlan) Backward(dqkv, dout, qkv compute.Tensor) {
	const op = "grouped attention Backward"
	qd, dod := p.e.groupedTensors(op, p.s, compute.F32, qkv, dout)
	dqd, _ := p.e.groupedTensors(op, p.s, compute.F32, dqkv, dout)
	if overlap(dqd, qd) {
		compute.PanicShapes("cuda", op, "dqkv overlaps qkv", dqd.shape, qd.shape)
	}
	e, gm := p.e, p.gemms
	T, hs := p.s.T, p.s.HeadSize
	ld, ldo, vo := p.s.Width(), p.s.Heads*hs, p.s.KVHeads*hs
	g := e.attnGrad.ptr
	for _, c := range p.calls {
		beta := float32(1)
		if c.first {
			beta = 0
		}
		do, a, ga := at(dod.ptr, c.o), at(p.att.ptr, c.att), at(g, c.att)
		// dP (T,T) = dO · Vᵀ
		gm.rowsABt(op, 1, do, ldo, p.oStride, at(qd.ptr, c.k+vo), ld, p.kvStride, ga, p.attStride)
		// dV (T,hs) (+)= Pᵀ · dO
		gm.colsPtB(op, 1, a, p.attStride, do, ldo, p.oStride, beta, at(dqd.ptr, c.k+vo), ld, p.kvStride)
	}
	e.fail(op, e.dev.SoftmaxCausalBackward(g, p.att.ptr, p.s.B*p.s.Heads, T))
	for _, c := range p.calls {
		beta := float32(1)
		if c.first {
			beta = 0
		}
		ga := at(g, c.att)
		// dQ (T,hs) = scale · dS · K
		gm.rowsPB(op, p.scale, ga, p.attStride, at(qd.ptr, c.k), ld, p.kvStride, at(dqd.ptr, c.q), ld, p.qStride)
		// dK (T,hs) (+)= scale · dSᵀ · Q
		gm.colsPtB(op, p.scale, ga, p.attStride, at(qd.ptr, c.q), ld, p.qStride, beta, at(dqd.ptr, c.k), ld, p.kvStride)
	}
}
