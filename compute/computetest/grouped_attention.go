package computetest

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunGroupedAttention is the conformance suite of compute.GroupedAttention;
// it skips when e has no GroupedAttention.
func RunGroupedAttention(t *testing.T, e compute.Engine) {
	ga := require[compute.GroupedAttention](t, e, "grouped-query attention")
	t.Run("Reference", testGroupedReference)
	t.Run("ForwardBackward", func(t *testing.T) { testGrouped(t, e, ga) })
	t.Run("SameAsMultiHead", func(t *testing.T) { testGroupedAsMultiHead(t, e, ga) })
	t.Run("BadSpec", func(t *testing.T) {
		for _, s := range []compute.GroupedAttentionSpec{{B: 1, T: 4, Heads: 4, KVHeads: 3, HeadSize: 2},
			{B: 1, T: 4, Heads: 2, KVHeads: 4, HeadSize: 2}, {B: 0, T: 4, Heads: 2, KVHeads: 1, HeadSize: 2},
			{B: 1, T: 0, Heads: 2, KVHeads: 1, HeadSize: 2}, {B: 1, T: 4, Heads: 2, KVHeads: 0, HeadSize: 2},
			{B: 1, T: 4, Heads: 2, KVHeads: 1, HeadSize: 0}} {
			if _, err := ga.GroupedCausalAttention(s); err == nil {
				t.Errorf("GroupedCausalAttention(%+v) did not fail", s)
			}
		}
	})
	t.Run("Panics", func(t *testing.T) {
		s := compute.GroupedAttentionSpec{B: 2, T: 3, Heads: 4, KVHeads: 2, HeadSize: 2}
		p, err := ga.GroupedCausalAttention(s)
		if err != nil {
			t.Fatal(err)
		}
		qkv := e.Alloc(2, 3, s.Width())
		expectPanic(t, "grouped attention Forward with qkv of three query widths", func() { p.Forward(e.Alloc(2, 3, 8), e.Alloc(2, 3, 24)) }, "attention")
		expectPanic(t, "grouped attention Forward with out of qkv's width", func() { p.Forward(e.Alloc(2, 3, s.Width()), qkv) }, "attention")
		expectPanic(t, "grouped attention Forward with out = qkv", func() { p.Forward(qkv, qkv) }, "attention")
		expectPanic(t, "grouped attention Backward with dqkv of another size",
			func() { p.Backward(e.Alloc(2, 2, s.Width()), e.Alloc(2, 3, 8), qkv) }, "attention")
		expectPanic(t, "grouped attention Backward with dqkv = qkv",
			func() { p.Backward(qkv, e.Alloc(2, 3, 8), qkv) }, "attention")
	})
	t.Run("NoAllocs", func(t *testing.T) {
		s := compute.GroupedAttentionSpec{B: 2, T: 70, Heads: 4, KVHeads: 2, HeadSize: 6}
		p, err := ga.GroupedCausalAttention(s)
		if err != nil {
			t.Fatal(err)
		}
		r := rng(101)
		qw, w := s.Heads*s.HeadSize, s.Width()
		qkv, dout := tensorOf(e, randVals(r, s.B*s.T*w), s.B, s.T, w), tensorOf(e, randVals(r, s.B*s.T*qw), s.B, s.T, qw)
		out, dqkv := e.Alloc(s.B, s.T, qw), e.Alloc(s.B, s.T, w)
		p.Forward(out, qkv) // Backward reads what a Forward kept, and the map runs in any order
		noAllocs(t, map[string]func(){
			"Forward":  func() { p.Forward(out, qkv) },
			"Backward": func() { p.Backward(dqkv, dout, qkv) },
		})
	})
}

// packQKV lays q (B·T rows of Heads·hs), k and v (rows of KVHeads·hs) side
// by side, row by row: the packed qkv of a GroupedAttentionPlan.
func packQKV(q, k, v []float32, s compute.GroupedAttentionSpec) []float32 {
	qw, kw, w := s.Heads*s.HeadSize, s.KVHeads*s.HeadSize, s.Width()
	out := make([]float32, s.B*s.T*w)
	for r := range s.B * s.T {
		copy(out[r*w:], q[r*qw:(r+1)*qw])
		copy(out[r*w+qw:], k[r*kw:(r+1)*kw])
		copy(out[r*w+qw+kw:], v[r*kw:(r+1)*kw])
	}
	return out
}

// unpackQKV is packQKV's inverse.
func unpackQKV(qkv []float32, s compute.GroupedAttentionSpec) (q, k, v []float32) {
	qw, kw, w := s.Heads*s.HeadSize, s.KVHeads*s.HeadSize, s.Width()
	rows := s.B * s.T
	q, k, v = make([]float32, rows*qw), make([]float32, rows*kw), make([]float32, rows*kw)
	for r := range rows {
		copy(q[r*qw:(r+1)*qw], qkv[r*w:])
		copy(k[r*kw:(r+1)*kw], qkv[r*w+qw:])
		copy(v[r*kw:(r+1)*kw], qkv[r*w+qw+kw:])
	}
	return q, k, v
}

// refGrouped is grouped-query causal attention in float64, position by
// position: out (B,T,H·hs) from q (B,T,H·hs), k and v (B,T,KVH·hs), and
// the probabilities (B,H,T,T). Query head h reads key/value head h/(H/KVH).
func refGrouped(q, k, v []float32, s compute.GroupedAttentionSpec) (out, probs []float64) {
	B, T, H, KVH, hs := s.B, s.T, s.Heads, s.KVHeads, s.HeadSize
	g, qw, kw := H/KVH, H*hs, KVH*hs
	scale := 1 / math.Sqrt(float64(hs))
	out, probs = make([]float64, B*T*qw), make([]float64, B*H*T*T)
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			j := h / g
			for t := 0; t < T; t++ {
				p := probs[((b*H+h)*T+t)*T:][:T]
				m := math.Inf(-1)
				for u := 0; u <= t; u++ {
					var d float64
					for i := 0; i < hs; i++ {
						d += float64(q[(b*T+t)*qw+h*hs+i]) * float64(k[(b*T+u)*kw+j*hs+i])
					}
					p[u] = d * scale
					m = math.Max(m, p[u])
				}
				var sum float64
				for u := 0; u <= t; u++ {
					p[u] = math.Exp(p[u] - m)
					sum += p[u]
				}
				for u := 0; u <= t; u++ {
					p[u] /= sum
					for i := 0; i < hs; i++ {
						out[(b*T+t)*qw+h*hs+i] += p[u] * float64(v[(b*T+u)*kw+j*hs+i])
					}
				}
			}
		}
	}
	return out, probs
}

// refGroupedBackward is the chain rule through refGrouped in float64, as
// refAttentionBackward is, with a key/value head's gradient summed over
// its group's query heads.
func refGroupedBackward(q, k, v, dout []float32, s compute.GroupedAttentionSpec) (dq, dk, dv []float64) {
	B, T, H, KVH, hs := s.B, s.T, s.Heads, s.KVHeads, s.HeadSize
	g, qw, kw := H/KVH, H*hs, KVH*hs
	scale := 1 / math.Sqrt(float64(hs))
	_, probs := refGrouped(q, k, v, s)
	dq, dk, dv = make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			j := h / g
			for t := 0; t < T; t++ {
				p := probs[((b*H+h)*T+t)*T:][:T]
				dp := make([]float64, t+1)
				var dot float64
				for u := 0; u <= t; u++ {
					for i := 0; i < hs; i++ {
						d := float64(dout[(b*T+t)*qw+h*hs+i])
						dp[u] += d * float64(v[(b*T+u)*kw+j*hs+i])
						dv[(b*T+u)*kw+j*hs+i] += p[u] * d
					}
					dot += p[u] * dp[u]
				}
				for u := 0; u <= t; u++ {
					ds := p[u] * (dp[u] - dot) * scale
					for i := 0; i < hs; i++ {
						dq[(b*T+t)*qw+h*hs+i] += ds * float64(k[(b*T+u)*kw+j*hs+i])
						dk[(b*T+u)*kw+j*hs+i] += ds * float64(q[(b*T+t)*qw+h*hs+i])
					}
				}
			}
		}
	}
	return dq, dk, dv
}

// The backward reference agrees with central differences of the forward
// reference's Σ dout·out, for groups of two query heads.
func testGroupedReference(t *testing.T) {
	s := compute.GroupedAttentionSpec{B: 2, T: 4, Heads: 4, KVHeads: 2, HeadSize: 3}
	r := rng(102)
	qw, kw := s.Heads*s.HeadSize, s.KVHeads*s.HeadSize
	q, k, v := randVals(r, s.B*s.T*qw), randVals(r, s.B*s.T*kw), randVals(r, s.B*s.T*kw)
	dout := randVals(r, s.B*s.T*qw)
	dq, dk, dv := refGroupedBackward(q, k, v, dout, s)
	loss := func() float64 {
		out, _ := refGrouped(q, k, v, s)
		return dot64(out, dout)
	}
	checkReferenceFD(t, "dq", q, dq, loss, 1e-4)
	checkReferenceFD(t, "dk", k, dk, loss, 1e-4)
	checkReferenceFD(t, "dv", v, dv, loss, 1e-4)
}

func testGrouped(t *testing.T, e compute.Engine, ga compute.GroupedAttention) {
	specs := []compute.GroupedAttentionSpec{
		{B: 2, T: 5, Heads: 4, KVHeads: 2, HeadSize: 3},
		{B: 1, T: 1, Heads: 2, KVHeads: 1, HeadSize: 8},   // T = 1
		{B: 2, T: 6, Heads: 3, KVHeads: 3, HeadSize: 4},   // as many key/value heads as query heads
		{B: 2, T: 9, Heads: 4, KVHeads: 1, HeadSize: 5},   // one key/value head (multi-query)
		{B: 1, T: 70, Heads: 6, KVHeads: 2, HeadSize: 4},  // more positions than a 64-row block
		{B: 1, T: 130, Heads: 4, KVHeads: 2, HeadSize: 6}, // three blocks, the last partial
		{B: 3, T: 64, Heads: 8, KVHeads: 2, HeadSize: 4},  // exactly one block, groups of four

		// head size 64, the largest of CUDA's flash kernel (64-row tiles), and past it
		// (CUDA's GEMM plans)
		{B: 1, T: 70, Heads: 4, KVHeads: 2, HeadSize: 64}, // two tiles, the last partial
		{B: 1, T: 5, Heads: 2, KVHeads: 1, HeadSize: 65},
		{B: 2, T: 70, Heads: 4, KVHeads: 2, HeadSize: 72}, // more positions than a 64-row block
	}
	for _, s := range specs {
		p, err := ga.GroupedCausalAttention(s)
		if err != nil {
			t.Fatalf("GroupedCausalAttention(%+v): %v", s, err)
		}
		r := rng(uint64(s.B*1000000 + s.T*1000 + s.Heads*10 + s.KVHeads))
		qw, kw := s.Heads*s.HeadSize, s.KVHeads*s.HeadSize
		qv, kv, vv := randVals(r, s.B*s.T*qw), randVals(r, s.B*s.T*kw), randVals(r, s.B*s.T*kw)
		for i := range qv {
			qv[i] *= 2 // scores of a few units: softmax far from uniform
		}
		for i := range kv {
			kv[i] *= 2
		}
		dov := randVals(r, s.B*s.T*qw)
		qkv := tensorOf(e, packQKV(qv, kv, vv, s), s.B, s.T, s.Width())
		out := tensorOf(e, nanVals(len(qv)), s.B, s.T, qw)
		p.Forward(out, qkv)
		wantOut, _ := refGrouped(qv, kv, vv, s)
		checkNear(t, fmt.Sprintf("grouped attention Forward %+v", s), read(e, out), wantOut, 1e-5)
		dqkv := tensorOf(e, nanVals(s.B*s.T*s.Width()), s.B, s.T, s.Width())
		p.Backward(dqkv, tensorOf(e, dov, s.B, s.T, qw), qkv)
		dq, dk, dv := unpackQKV(read(e, dqkv), s)
		wq, wk, wv := refGroupedBackward(qv, kv, vv, dov, s)
		tol := 2e-5 * float64(s.Heads/s.KVHeads) // a key/value head sums its group
		checkNear(t, fmt.Sprintf("grouped attention dq %+v", s), dq, wq, tol)
		checkNear(t, fmt.Sprintf("grouped attention dk %+v", s), dk, wk, tol)
		checkNear(t, fmt.Sprintf("grouped attention dv %+v", s), dv, wv, tol)
		if got := read(e, qkv); !slices.Equal(got, packQKV(qv, kv, vv, s)) {
			t.Errorf("grouped attention %+v wrote qkv", s)
		}
	}
}

// With as many key/value heads as query heads, grouped attention is the
// engine's multi-head attention (compute.Attention) on the same packed
// qkv, to the bit; skipped when the engine has no Attention.
func testGroupedAsMultiHead(t *testing.T, e compute.Engine, ga compute.GroupedAttention) {
	at := require[compute.Attention](t, e, "causal attention")
	const B, T, H, hs = 2, 70, 3, 8
	C := H * hs
	mp, err := at.CausalAttention(compute.AttentionSpec{B: B, T: T, C: C, Heads: H})
	if err != nil {
		t.Fatal(err)
	}
	gp, err := ga.GroupedCausalAttention(compute.GroupedAttentionSpec{B: B, T: T, Heads: H, KVHeads: H, HeadSize: hs})
	if err != nil {
		t.Fatal(err)
	}
	r := rng(103)
	packed, dout := tensorOf(e, randVals(r, B*T*3*C), B, T, 3*C), tensorOf(e, randVals(r, B*T*C), B, T, C)
	mout, gout := e.Alloc(B, T, C), e.Alloc(B, T, C)
	mp.Forward(mout, packed)
	gp.Forward(gout, packed)
	checkNear(t, "grouped against multi-head Forward", read(e, gout), widen(read(e, mout)), 0)
	md, gd := e.Alloc(B, T, 3*C), e.Alloc(B, T, 3*C)
	mp.Backward(md, dout, packed)
	gp.Backward(gd, dout, packed)
	checkNear(t, "grouped against multi-head Backward", read(e, gd), widen(read(e, md)), 0)
}

// widen is s in float64.
func widen(s []float32) []float64 {
	w := make([]float64, len(s))
	for i, v := range s {
		w[i] = float64(v)
	}
	return w
}
