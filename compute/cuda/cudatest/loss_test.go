package cudatest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
)

// TestSoftmaxXentBF16 is sdc_softmax_xent on bf16 logits (the fused
// classifier): the losses without and with the gradient in place of the
// logits, the statistics added to, and the library's argument checks.
func TestSoftmaxXentBF16(t *testing.T) {
	const bf = cudalib.BFloat16
	g := newGPU(t)
	const n, v, vp = 6, 10, 16
	logits := g.randBF(n*vp, 3, 0)
	for i := 0; i < n; i++ {
		for j := v; j < vp; j++ {
			logits[i*vp+j] = 8192 // padding must not count
		}
	}
	tgt := []int32{3, 0, -1, 9, 12, 5} // -1 and 12 (>= V): ignored rows
	const dscale = 0.25
	pl, pt, ploss := g.bf(logits), g.i32(tgt), g.alloc(4*n)
	g.ok(g.d.SoftmaxXent(bf, pl, pt, n, v, vp, 0, dscale, false, 0, ploss))
	rloss, rg := make([]float64, n), make([]float64, n*vp)
	for i := 0; i < n; i++ {
		x := logits[i*vp : i*vp+v]
		mx := math.Inf(-1)
		for _, xv := range x {
			mx = math.Max(mx, xv)
		}
		var z float64
		for _, xv := range x {
			z += math.Exp(xv - mx)
		}
		lse := mx + math.Log(z)
		k := int(tgt[i])
		if k < 0 || k >= v {
			continue
		}
		rloss[i] = lse - x[k]
		for j := range x {
			rg[i*vp+j] = math.Exp(x[j]-lse) * dscale
		}
		rg[i*vp+k] -= dscale
	}
	near(t, "losses", g.readF32(ploss, n), rloss, 1e-6, 1e-9)
	near(t, "logits kept without write_grad", g.readBF(pl, n*vp), logits, 0, 0)
	ps := g.f32([]float32{1, 7, 2})
	g.ok(g.d.SoftmaxXent(bf, pl, pt, n, v, vp, pl, dscale, false, ps, ploss))
	near(t, "losses", g.readF32(ploss, n), rloss, 1e-6, 1e-9)
	near(t, "dlogits", g.readBF(pl, n*vp), rg, bf16Tol, 1e-7)
	var sum float64
	for _, l := range g.readF32(ploss, n) {
		sum += l
	}
	// stats[0] += the losses' sum, stats[1] as it was, stats[2] += the rows not labelled -1
	near(t, "stats", g.readF32(ps, 3), []float64{float64(1 + float32(sum)), 7, 2 + 5}, 0, 0)
	wantArg(t, "Vp=12", g.d.SoftmaxXent(bf, pl, pt, n, v, 12, pl, dscale, false, 0, ploss))
	wantArg(t, "Vp<V", g.d.SoftmaxXent(bf, pl, pt, n, 20, vp, pl, dscale, false, 0, ploss))
	wantArg(t, "no losses", g.d.SoftmaxXent(bf, pl, pt, n, v, vp, pl, dscale, false, 0, 0))
	wantArg(t, "dlogits apart", g.d.SoftmaxXent(bf, pl, pt, n, v, vp, ploss, dscale, false, 0, ploss))
	wantArg(t, "step block", g.d.SoftmaxXent(bf, pl, pt, n, v, vp, pl, dscale, true, 0, ploss))
}
