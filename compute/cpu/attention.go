package cpu

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/internal/hostloops"
	gblas "gonum.org/v1/gonum/blas"
)

var _ compute.Attention = (*Engine)(nil)

// attnBlock is how many query rows one step of attention takes: a block of
// queries r0..r0+attnBlock-1 needs keys 0..r0+attnBlock-1 only, so the GEMMs
// skip the causal upper triangle but for the diagonal blocks (about half the
// scores of a long sequence), while the blocks stay large enough to run the
// BLAS at speed.
const attnBlock = 64

// CausalAttention returns the plan of attention over s: it allocates the
// probabilities (B,Heads,T,T), which Backward reads, and the backward's
// scratch. It fails when a dimension is below 1 or C is not a multiple of
// Heads.
func (e *Engine) CausalAttention(s compute.AttentionSpec) (compute.AttentionPlan, error) {
	if s.B < 1 || s.T < 1 || s.C < 1 || s.Heads < 1 || s.C%s.Heads != 0 {
		return nil, fmt.Errorf("cpu: causal attention %+v: want B, T, C, Heads >= 1 with C a multiple of Heads", s)
	}
	hs := s.C / s.Heads
	return &attentionPlan{
		s:    s,
		hs:   hs,
		head: newAttnHead(e.blas, s.T, hs),
		att:  make([]float32, s.B*s.Heads*s.T*s.T),
	}, nil
}

// attentionPlan is causal self-attention for one shape, per sequence and
// head: S = Q·Kᵀ/√hs on the BLAS, reading Q and K straight out of qkv with
// a leading dimension of 3C; P = causal softmax of S (hostloops); out = P·V.
// Like the engine, a plan may be used by one goroutine at a time (its
// probabilities and scratch are its own).
type attentionPlan struct {
	s    compute.AttentionSpec
	hs   int
	head attnHead
	// att is (B,Heads,T,T): the softmax probabilities of the last Forward,
	// zero above the diagonal.
	att []float32
}

// check returns the memory of the (B,T,3C) and (B,T,C) tensors of a call.
func (p *attentionPlan) check(op string, wide, narrow compute.Tensor) (wd, nd []float32) {
	s := p.s
	wd, nd = data(op, wide), data(op, narrow)
	ws, ns := wide.Shape(), narrow.Shape()
	if len(wd) != s.B*s.T*3*s.C || ws[len(ws)-1] != 3*s.C || len(nd) != s.B*s.T*s.C || ns[len(ns)-1] != s.C {
		compute.PanicShapes("cpu", op, fmt.Sprintf("want (B,T,3C) and (B,T,C) for B=%d T=%d C=%d", s.B, s.T, s.C), ws, ns)
	}
	if overlap(wd, nd) {
		compute.PanicShapes("cpu", op, "the tensors overlap", ws, ns)
	}
	return wd, nd
}

// Forward computes out (B,T,C) from qkv (B,T,3C) and keeps the
// probabilities for Backward.
func (p *attentionPlan) Forward(out, qkv compute.Tensor) {
	qd, od := p.check("attention Forward", qkv, out)
	T, C, H, hs := p.s.T, p.s.C, p.s.Heads, p.hs
	ld := 3 * C
	for b := 0; b < p.s.B; b++ {
		for h := 0; h < H; h++ {
			q := qd[b*T*ld+h*hs:] // query t at q[t*ld:], its key at C, its value at 2C
			att := p.att[(b*H+h)*T*T : (b*H+h+1)*T*T]
			p.head.forward(att, q, ld, q[C:], q[2*C:], ld, od[b*T*C+h*hs:], C)
		}
	}
}

// Backward writes dqkv (B,T,3C) from dout (B,T,C), using the probabilities
// of the last Forward (which must have run on this qkv).
func (p *attentionPlan) Backward(dqkv, dout, qkv compute.Tensor) {
	dqd, dod := p.check("attention Backward", dqkv, dout)
	qd, _ := p.check("attention Backward", qkv, dout)
	if overlap(dqd, qd) {
		compute.PanicShapes("cpu", "attention Backward", "dqkv overlaps qkv", dqkv.Shape(), qkv.Shape())
	}
	T, C, H, hs := p.s.T, p.s.C, p.s.Heads, p.hs
	ld := 3 * C
	for b := 0; b < p.s.B; b++ {
		for h := 0; h < H; h++ {
			q := qd[b*T*ld+h*hs:]
			dq := dqd[b*T*ld+h*hs:]
			att := p.att[(b*H+h)*T*T : (b*H+h+1)*T*T]
			p.head.backward(att, q, ld, q[C:], q[2*C:], ld, dod[b*T*C+h*hs:], C, dq, dq[C:], dq[2*C:], true)
		}
	}
}

// attnHead is attention of one head of one sequence, on the BLAS: the
// part that the multi-head and the grouped plans share. Its slices start
// at the head's first channel of position 0; a row's next position is a
// leading dimension further.
type attnHead struct {
	blas  *blas.BLAS
	t, hs int
	scale float32
	// dp is (min(attnBlock,T),T): a block's gradient at P, then at S.
	dp []float32
}

func newAttnHead(b *blas.BLAS, t, hs int) attnHead {
	return attnHead{blas: b, t: t, hs: hs, scale: float32(1 / math.Sqrt(float64(hs))), dp: make([]float32, min(attnBlock, t)*t)}
}

// forward computes o (T,hs, leading dimension ldo) from q (ldq), and k, v
// (ldkv), and writes the probabilities att (T,T) block by block: S =
// Q·Kᵀ/√hs, P = causal softmax of S, o = P·V.
func (a *attnHead) forward(att, q []float32, ldq int, k, v []float32, ldkv int, o []float32, ldo int) {
	T, hs := a.t, a.hs
	for r0 := 0; r0 < T; r0 += attnBlock {
		rows := min(attnBlock, T-r0)
		keys := r0 + rows
		pr := att[r0*T:]
		// pr (rows,keys) = scale · q[r0:keys] · k[0:keys]ᵀ
		a.blas.Sgemm(gblas.NoTrans, gblas.Trans, rows, keys, hs, a.scale, q[r0*ldq:], ldq, k, ldkv, 0, pr, T)
		hostloops.SoftmaxCausal(pr, T, r0, rows, keys)
		// o[r0:keys] (rows,hs) = pr · v[0:keys]
		a.blas.Sgemm(gblas.NoTrans, gblas.NoTrans, rows, hs, keys, 1, pr, T, v, ldkv, 0, o[r0*ldo:], ldo)
	}
}

// backward writes dq (ldq) and dk, dv (ldkv) of the head from do (ldo) and
// the forward's att, q, k, v. The blocks run last to first: the last one
// reaches every key, so its dK and dV products overwrite them (beta 0) when
// first is true, and every other product adds to them (a key/value head
// that several query heads share gets its first query head's with first
// set, the others' without).
func (a *attnHead) backward(att, q []float32, ldq int, k, v []float32, ldkv int, do []float32, ldo int, dq, dk, dv []float32, first bool) {
	T, hs := a.t, a.hs
	last := (T - 1) / attnBlock * attnBlock
	for r0 := last; r0 >= 0; r0 -= attnBlock {
		rows := min(attnBlock, T-r0)
		keys := r0 + rows
		beta := float32(1)
		if first && r0 == last {
			beta = 0
		}
		pr, dor := att[r0*T:], do[r0*ldo:]
		// dp (rows,keys) = do[r0:keys] · v[0:keys]ᵀ
		a.blas.Sgemm(gblas.NoTrans, gblas.Trans, rows, keys, hs, 1, dor, ldo, v, ldkv, 0, a.dp, T)
		// dv[0:keys] (+)= prᵀ · do[r0:keys]
		a.blas.Sgemm(gblas.Trans, gblas.NoTrans, keys, hs, rows, 1, pr, T, dor, ldo, beta, dv, ldkv)
		hostloops.SoftmaxCausalBackward(a.dp, pr, T, r0, rows, keys)
		// dq[r0:keys] = scale · ds · k[0:keys]
		a.blas.Sgemm(gblas.NoTrans, gblas.NoTrans, rows, hs, keys, a.scale, a.dp, T, k, ldkv, 0, dq[r0*ldq:], ldq)
		// dk[0:keys] (+)= scale · dsᵀ · q[r0:keys]
		a.blas.Sgemm(gblas.Trans, gblas.NoTrans, keys, hs, rows, a.scale, a.dp, T, q[r0*ldq:], ldq, beta, dk, ldkv)
	}
}
