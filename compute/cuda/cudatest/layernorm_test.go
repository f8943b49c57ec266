package cudatest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
)

// lnRef: LayerNorm in float64, the variance as E[x²] - mean².
func lnRef(x, w, b []float64, n, c int) (out, mean, rstd []float64) {
	out, mean, rstd = make([]float64, n*c), make([]float64, n), make([]float64, n)
	for i := 0; i < n; i++ {
		var s, s2 float64
		for _, v := range x[i*c : (i+1)*c] {
			s += v
			s2 += v * v
		}
		mu := s / float64(c)
		rs := 1 / math.Sqrt(s2/float64(c)-mu*mu+1e-5)
		mean[i], rstd[i] = mu, rs
		for j := 0; j < c; j++ {
			out[i*c+j] = w[j]*(x[i*c+j]-mu)*rs + b[j]
		}
	}
	return
}

// TestLayerNormBF16 is sdc_layer_norm and sdc_layer_norm_backward on bf16
// against float64 and finite differences: the forward with and without
// statistics, the backward adding to dx, dw and db, and the library's
// argument checks.
func TestLayerNormBF16(t *testing.T) {
	const bf = cudalib.BFloat16
	g := newGPU(t)
	const n, c = 4, 16
	x, w, b := g.randBF(n*c, 1.5, 0.3), g.randBF(c, 0.2, 1), g.randBF(c, 0.2, 0)
	dy, r := g.randBF(n*c, 1, 0), g.randBF(n*c, 1, 0)
	dw0, db0 := g.randF32(c, 1), g.randF32(c, 1)
	px, pw, pb, pdy, pr := g.bf(x), g.bf(w), g.bf(b), g.bf(dy), g.bf(r)
	pout, pmean, prstd := g.alloc(2*n*c), g.alloc(4*n), g.alloc(4*n)
	pdw, pdb := g.f32(dw0), g.f32(db0)
	sb, err := g.d.LayerNormBackwardScratchBytes(bf, n, c)
	g.ok(err)
	if sb != 2*c*4 {
		t.Errorf("scratch %d bytes, want one block's partials, %d", sb, 2*c*4)
	}
	scratch := g.alloc(sb)
	g.ok(g.d.LayerNorm(bf, pout, pmean, prstd, px, pw, pb, n, c, lnEps))
	ro, rm, rr := lnRef(x, w, b, n, c)
	near(t, "out", g.readBF(pout, n*c), ro, bf16Tol, 1e-9)
	near(t, "mean", g.readF32(pmean, n), rm, 1e-6, 1e-9)
	near(t, "rstd", g.readF32(prstd, n), rr, 1e-6, 1e-9)
	g.ok(g.d.LayerNorm(bf, pout, 0, 0, px, pw, pb, n, c, lnEps)) // inference: no statistics

	g.ok(g.d.LayerNormBackward(bf, pr, pdw, pdb, pdy, px, pw, pmean, prstd, n, c, true, scratch))
	// Finite differences of L = sum(dy * LN(x)), in float64.
	loss := func(x, w, b []float64) float64 {
		o, _, _ := lnRef(x, w, b, n, c)
		return dot(o, dy)
	}
	const h = 1e-6
	fd := func(v []float64, i int, f func() float64) float64 {
		v0 := v[i]
		v[i] = v0 + h
		up := f()
		v[i] = v0 - h
		dn := f()
		v[i] = v0
		return (up - dn) / (2 * h)
	}
	L := func() float64 { return loss(x, w, b) }
	rdx, rdw, rdb := make([]float64, n*c), make([]float64, c), make([]float64, c)
	for i := range rdx {
		rdx[i] = r[i] + fd(x, i, L)
	}
	for j := 0; j < c; j++ {
		rdw[j] = float64(dw0[j]) + fd(w, j, L)
		rdb[j] = float64(db0[j]) + fd(b, j, L)
	}
	near(t, "dinp (added to)", g.readBF(pr, n*c), rdx, bf16Tol, 1e-6)
	near(t, "dweight (added to)", g.readF32(pdw, c), rdw, 1e-6, 1e-7)
	near(t, "dbias (added to)", g.readF32(pdb, c), rdb, 1e-6, 1e-7)

	wantArg(t, "C=12", g.d.LayerNorm(bf, pout, pmean, prstd, px, pw, pb, n, 12, lnEps))
	wantArg(t, "unaligned", g.d.LayerNorm(bf, pout+2, pmean, prstd, px, pw, pb, n, c, lnEps))
	wantArg(t, "no bias", g.d.LayerNorm(bf, pout, pmean, prstd, px, pw, 0, n, c, lnEps))
	wantArg(t, "eps", g.d.LayerNorm(bf, pout, pmean, prstd, px, pw, pb, n, c, 1e-6))
	wantArg(t, "dx written", g.d.LayerNormBackward(bf, pr, pdw, pdb, pdy, px, pw, pmean, prstd, n, c, false, scratch))
	wantArg(t, "no scratch", g.d.LayerNormBackward(bf, pr, pdw, pdb, pdy, px, pw, pmean, prstd, n, c, true, 0))
}
