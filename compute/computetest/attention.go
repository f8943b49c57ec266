package computetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunAttention is the conformance suite of compute.Attention; it skips when
// e has no Attention.
func RunAttention(t *testing.T, e compute.Engine) {
	at := require[compute.Attention](t, e, "causal attention")
	t.Run("Reference", testAttentionReference)
	t.Run("ForwardBackward", func(t *testing.T) { testAttention(t, e, at) })
	t.Run("BadSpec", func(t *testing.T) {
		for _, s := range []compute.AttentionSpec{{B: 1, T: 4, C: 10, Heads: 3}, {B: 0, T: 4, C: 8, Heads: 2},
			{B: 1, T: 0, C: 8, Heads: 2}, {B: 1, T: 4, C: 8, Heads: 0}} {
			if _, err := at.CausalAttention(s); err == nil {
				t.Errorf("CausalAttention(%+v) did not fail", s)
			}
		}
	})
	t.Run("Panics", func(t *testing.T) {
		p, err := at.CausalAttention(compute.AttentionSpec{B: 2, T: 3, C: 4, Heads: 2})
		if err != nil {
			t.Fatal(err)
		}
		expectPanic(t, "attention Forward with qkv of another width", func() { p.Forward(e.Alloc(2, 3, 4), e.Alloc(2, 3, 8)) }, "attention")
		expectPanic(t, "attention Backward with dout of another size", func() { p.Backward(e.Alloc(2, 3, 12), e.Alloc(2, 2, 4), e.Alloc(2, 3, 12)) }, "attention")
	})
	t.Run("NoAllocs", func(t *testing.T) {
		s := compute.AttentionSpec{B: 2, T: 70, C: 24, Heads: 3}
		p, err := at.CausalAttention(s)
		if err != nil {
			t.Fatal(err)
		}
		r := rng(61)
		qkv := tensorOf(e, randVals(r, s.B*s.T*3*s.C), s.B, s.T, 3*s.C)
		out, dout, dqkv := e.Alloc(s.B, s.T, s.C), tensorOf(e, randVals(r, s.B*s.T*s.C), s.B, s.T, s.C), e.Alloc(s.B, s.T, 3*s.C)
		p.Forward(out, qkv) // Backward reads what a Forward kept, and the map runs in any order
		noAllocs(t, map[string]func(){
			"Forward":  func() { p.Forward(out, qkv) },
			"Backward": func() { p.Backward(dqkv, dout, qkv) },
		})
	})
}

// refAttention is causal multi-head attention in float64, position by
// position: out (B,T,C) from qkv (B,T,3C), and the probabilities
// (B,Heads,T,T).
func refAttention(qkv []float32, s compute.AttentionSpec) (out, probs []float64) {
	B, T, C, H := s.B, s.T, s.C, s.Heads
	hs := C / H
	scale := 1 / math.Sqrt(float64(hs))
	out, probs = make([]float64, B*T*C), make([]float64, B*H*T*T)
	at := func(b, t, part, h, i int) float64 { return float64(qkv[(b*T+t)*3*C+part*C+h*hs+i]) }
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for t := 0; t < T; t++ {
				p := probs[((b*H+h)*T+t)*T:][:T]
				m := math.Inf(-1)
				for u := 0; u <= t; u++ {
					var d float64
					for i := 0; i < hs; i++ {
						d += at(b, t, 0, h, i) * at(b, u, 1, h, i)
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
						out[(b*T+t)*C+h*hs+i] += p[u] * at(b, u, 2, h, i)
					}
				}
			}
		}
	}
	return out, probs
}

// refAttentionBackward is the chain rule through refAttention in float64:
// dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP - rowsum(P∘dP)), dQ = dS·K·scale,
// dK = dSᵀ·Q·scale, written as loops over positions.
func refAttentionBackward(qkv, dout []float32, s compute.AttentionSpec) []float64 {
	B, T, C, H := s.B, s.T, s.C, s.Heads
	hs := C / H
	scale := 1 / math.Sqrt(float64(hs))
	_, probs := refAttention(qkv, s)
	d := make([]float64, B*T*3*C)
	idx := func(b, t, part, h, i int) int { return (b*T+t)*3*C + part*C + h*hs + i }
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			for t := 0; t < T; t++ {
				p := probs[((b*H+h)*T+t)*T:][:T]
				dp := make([]float64, t+1)
				var dot float64
				for u := 0; u <= t; u++ {
					for i := 0; i < hs; i++ {
						g := float64(dout[(b*T+t)*C+h*hs+i])
						dp[u] += g * float64(qkv[idx(b, u, 2, h, i)])
						d[idx(b, u, 2, h, i)] += p[u] * g
					}
					dot += p[u] * dp[u]
				}
				for u := 0; u <= t; u++ {
					ds := p[u] * (dp[u] - dot) * scale
					for i := 0; i < hs; i++ {
						d[idx(b, t, 0, h, i)] += ds * float64(qkv[idx(b, u, 1, h, i)])
						d[idx(b, u, 1, h, i)] += ds * float64(qkv[idx(b, t, 0, h, i)])
					}
				}
			}
		}
	}
	return d
}

// The backward reference agrees with central differences of the forward
// reference's Σ dout·out.
func testAttentionReference(t *testing.T) {
	s := compute.AttentionSpec{B: 2, T: 5, C: 6, Heads: 2}
	r := rng(62)
	qkv, dout := randVals(r, s.B*s.T*3*s.C), randVals(r, s.B*s.T*s.C)
	want := refAttentionBackward(qkv, dout, s)
	loss := func() float64 {
		out, _ := refAttention(qkv, s)
		var l float64
		for i, v := range out {
			l += v * float64(dout[i])
		}
		return l
	}
	for i := range qkv {
		const h = 1e-3
		old := qkv[i]
		qkv[i] = old + h
		up := loss()
		qkv[i] = old - h
		down := loss()
		qkv[i] = old
		if g := (up - down) / (float64(old+h) - float64(old-h)); math.Abs(g-want[i]) > 1e-4 {
			t.Errorf("reference dqkv[%d] = %v, finite differences %v", i, want[i], g)
		}
	}
}

func testAttention(t *testing.T, e compute.Engine, at compute.Attention) {
	specs := []compute.AttentionSpec{
		{B: 2, T: 5, C: 6, Heads: 2},
		{B: 1, T: 1, C: 8, Heads: 1},    // T = 1: every query sees itself only
		{B: 2, T: 3, C: 4, Heads: 1},    // one head
		{B: 2, T: 9, C: 15, Heads: 3},   // head size 5
		{B: 1, T: 70, C: 24, Heads: 3},  // more positions than a 64-row block
		{B: 1, T: 130, C: 12, Heads: 2}, // three blocks, the last partial
		{B: 3, T: 64, C: 32, Heads: 4},  // exactly one block

		// head size 64, the largest of CUDA's flash kernel (64-row tiles), and past it
		// (CUDA's GEMM plans)
		{B: 1, T: 64, C: 64, Heads: 1},   // one full tile
		{B: 2, T: 130, C: 128, Heads: 2}, // three tiles, the last partial
		{B: 1, T: 5, C: 130, Heads: 2},   // head size 65
		{B: 2, T: 70, C: 144, Heads: 2},  // head size 72, more positions than a 64-row block
	}
	for _, s := range specs {
		p, err := at.CausalAttention(s)
		if err != nil {
			t.Fatalf("CausalAttention(%+v): %v", s, err)
		}
		r := rng(uint64(s.B*1000000 + s.T*1000 + s.C))
		qv, dov := randVals(r, s.B*s.T*3*s.C), randVals(r, s.B*s.T*s.C)
		for i := range qv {
			qv[i] *= 2 // scores of a few units: softmax far from uniform
		}
		qkv := tensorOf(e, qv, s.B, s.T, 3*s.C)
		out := tensorOf(e, nanVals(s.B*s.T*s.C), s.B, s.T, s.C)
		p.Forward(out, qkv)
		wantOut, _ := refAttention(qv, s)
		checkNear(t, fmt.Sprintf("attention Forward %+v", s), read(e, out), wantOut, 1e-5)
		dqkv := tensorOf(e, nanVals(s.B*s.T*3*s.C), s.B, s.T, 3*s.C)
		dout := tensorOf(e, dov, s.B, s.T, s.C)
		p.Backward(dqkv, dout, qkv)
		checkNear(t, fmt.Sprintf("attention Backward %+v", s), read(e, dqkv), refAttentionBackward(qv, dov, s), 2e-5)
	}
}
