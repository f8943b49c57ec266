package cuda

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

// flashF32MaxHeadSize is the largest head size the fp32 flash kernel takes
// (a 64 x 64 tile's width); larger ones get the GEMM plans.
const flashF32MaxHeadSize = 64

// flashF32 is causal attention in fp32 by the library's flash kernel
// (sdc_attention_f32 and its backward): the scores and probabilities never
// reach memory. Its sums run by 64 x 64 tiles with an online softmax, so
// its results agree with the CPU engine's to fp32 rounding, not bit for
// bit; its backward sums in an order fixed by the shape, without atomics,
// so its bits repeat. One layout serves both plans, packed qkv
// (flashAttention) and grouped-query q, k, v (flashGrouped): query head h
// of row r at q + r·ldq + h·hs, its key and value at k + r·ldkv + (h/g)·hs
// and v likewise, the gradients at the same offsets. The plan keeps each
// row's log-sum-exp and the forward's out, which the backward reads; the
// backward's scratch (D, one float a row, and dS of every causal 64×64
// tile: cudalib.AttentionF32ScratchFloats, 214 MB at GPT-2 124M batch 8)
// is the engine's attnGrad, shared with the other fp32 attention plans,
// which run one after the other on the stream.
type flashF32 struct {
	e                 *Engine
	b, t, nh, kvh, hs int
	lse               *Tensor // (B,Heads,T)
	out               *Tensor // the last Forward's out
}

func (e *Engine) newFlashF32(b, t, nh, kvh, hs int) flashF32 {
	if n := cudalib.AttentionF32ScratchFloats(b, nh, t); e.attnGrad == nil || e.attnGrad.size < n {
		e.attnGrad = e.Alloc(n).(*Tensor)
	}
	return flashF32{e: e, b: b, t: t, nh: nh, kvh: kvh, hs: hs, lse: e.Alloc(b * nh * t).(*Tensor)}
}

// Path says which kernel runs.
func (f *flashF32) Path() string { return "flash attention (fp32)" }

// forward writes od from q, k, v (rows ldq and ldkv elements apart) and
// keeps od for backward.
func (f *flashF32) forward(op string, od *Tensor, q, k, v uintptr, ldq, ldkv int) {
	f.out = od
	f.e.fail(op, f.e.dev.AttentionF32(od.ptr, f.lse.ptr, q, k, v, ldq, ldkv, f.b, f.t, f.nh, f.kvh, f.hs))
}

// forwardOut is the out of the last Forward, which the backward reads; it
// panics before the first.
func (f *flashF32) forwardOut(op string) *Tensor {
	if f.out == nil {
		panic("cuda: " + op + " before Forward")
	}
	return f.out
}

// backward writes dq, dk, dv (in q's, k's and v's layout) from dout, the
// forward's q, k, v and the out and lse it kept.
func (f *flashF32) backward(op string, dq, dk, dv, dout, q, k, v uintptr, ldq, ldkv int) {
	e := f.e
	e.fail(op, e.dev.AttentionBackwardF32(dq, dk, dv, dout, q, k, v, f.out.ptr, f.lse.ptr, ldq, ldkv,
		f.b, f.t, f.nh, f.kvh, f.hs, e.attnGrad.ptr))
}

// flashAttention is CausalAttention's fp32 plan at a head size up to 64:
// flashF32 on packed qkv (B,T,3C), k C and v 2C elements past q, rows 3C
// apart.
type flashAttention struct {
	flashF32
	s compute.AttentionSpec
}

// Forward computes out (B,T,C) from qkv (B,T,3C), keeping lse and out.
func (p *flashAttention) Forward(out, qkv compute.Tensor) {
	const op = "attention Forward"
	qd, od := p.e.packedTensors(op, p.s, qkv, out)
	q, C := qd.ptr, p.s.C
	p.forward(op, od, q, at(q, C), at(q, 2*C), 3*C, 3*C)
}

// Backward writes dqkv (B,T,3C) from dout (B,T,C), the forward's qkv and
// the out and lse it kept.
func (p *flashAttention) Backward(dqkv, dout, qkv compute.Tensor) {
	const op = "attention Backward"
	dqd, dod := p.e.packedTensors(op, p.s, dqkv, dout)
	qd, _ := p.e.packedTensors(op, p.s, qkv, dout)
	out := p.forwardOut(op)
	if anyOverlap(dqd, qd, out) {
		compute.PanicShapes("cuda", op, "dqkv overlaps qkv or out", dqd.shape, qd.shape, out.shape)
	}
	q, d, C := qd.ptr, dqd.ptr, p.s.C
	p.backward(op, d, at(d, C), at(d, 2*C), dod.ptr, q, at(q, C), at(q, 2*C), 3*C, 3*C)
}

// flashGrouped is GroupedCausalAttention's fp32 plan at a head size up to
// 64: flashF32 on packed qkv (B,T,Width()), keys Heads·hs and values
// (Heads+KVHeads)·hs elements past the queries, rows Width() apart, a
// key/value head's dK and dV summed over its group's query heads in the
// kernel.
type flashGrouped struct {
	flashF32
	s compute.GroupedAttentionSpec
}

// Forward computes out from qkv, keeping lse and out.
func (p *flashGrouped) Forward(out, qkv compute.Tensor) {
	const op = "grouped attention Forward"
	qd, od := p.e.groupedTensors(op, p.s, compute.F32, qkv, out)
	q, w, ko, vo := qd.ptr, p.s.Width(), p.nh*p.hs, (p.nh+p.kvh)*p.hs
	p.forward(op, od, q, at(q, ko), at(q, vo), w, w)
}

// Backward writes dqkv from dout, the forward's qkv and the out and lse it
// kept.
func (p *flashGrouped) Backward(dqkv, dout, qkv compute.Tensor) {
	const op = "grouped attention Backward"
	qd, dod := p.e.groupedTensors(op, p.s, compute.F32, qkv, dout)
	dqd, _ := p.e.groupedTensors(op, p.s, compute.F32, dqkv, dout)
	out := p.forwardOut(op)
	if anyOverlap(dqd, qd, out) {
		compute.PanicShapes("cuda", op, "dqkv overlaps qkv or out", dqd.shape, qd.shape, out.shape)
	}
	q, d, w, ko, vo := qd.ptr, dqd.ptr, p.s.Width(), p.nh*p.hs, (p.nh+p.kvh)*p.hs
	p.backward(op, d, at(d, ko), at(d, vo), dod.ptr, q, at(q, ko), at(q, vo), w, w)
}
