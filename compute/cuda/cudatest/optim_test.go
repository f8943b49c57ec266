package cudatest

import (
	"math"
	"testing"
	"unsafe"
)

type hyper struct {
	lr, beta1, beta2, eps, wd, gradScale float32
	step, pad                            int32
}

func (g *gpu) hyper(h hyper) uintptr {
	p := g.alloc(int(unsafe.Sizeof(h)))
	g.up(p, unsafe.Pointer(&h), int(unsafe.Sizeof(h)))
	return p
}

// adamRef: one AdamW step in float64 by the header's formula.
func adamRef(h hyper, p, gr, m, v []float32, decays func(i int) bool) (rp, rm, rv []float64) {
	rp, rm, rv = make([]float64, len(p)), make([]float64, len(p)), make([]float64, len(p))
	lr, b1, b2 := float64(h.lr), float64(h.beta1), float64(h.beta2)
	bc1, bc2 := 1-math.Pow(b1, float64(h.step)), 1-math.Pow(b2, float64(h.step))
	for i := range p {
		gi := float64(gr[i]) * float64(h.gradScale)
		pi := float64(p[i])
		if decays(i) {
			pi -= lr * float64(h.wd) * pi
		}
		rm[i] = b1*float64(m[i]) + (1-b1)*gi
		rv[i] = b2*float64(v[i]) + (1-b2)*gi*gi
		rp[i] = pi - lr/bc1*rm[i]/(math.Sqrt(rv[i]/bc2)+float64(h.eps))
	}
	return
}

// TestAdamWBF16 is sdc_adamw_bf16 against the header's formula in float64:
// the decay by chunk, the bf16 copy, every element decaying without a mask,
// and the library's argument checks.
func TestAdamWBF16(t *testing.T) {
	g := newGPU(t)
	const n, chunk = 10, 4
	h := hyper{lr: 6e-4, beta1: 0.9, beta2: 0.95, eps: 1e-8, wd: 0.1, gradScale: 0.5, step: 3}
	p, gr, m := g.randF32(n, 0.5), g.randF32(n, 0.1), g.randF32(n, 0.01)
	v := make([]float32, n)
	for i := range v {
		v[i] = 1e-4 * float32(g.rng.Float64())
	}
	decay := []byte{1, 0, 1, 0xff} // chunks 0 and 2 decay (the 4th byte is not read)
	pp, pg, pm, pv, pb := g.f32(p), g.f32(gr), g.f32(m), g.f32(v), g.alloc(2*n)
	pd := g.alloc(len(decay))
	g.up(pd, unsafe.Pointer(&decay[0]), len(decay))
	ph := g.hyper(h)
	g.ok(g.d.AdamWBF16(pp, pb, pg, pm, pv, pd, chunk, n, ph))
	rp, rm, rv := adamRef(h, p, gr, m, v, func(i int) bool { return decay[i/chunk] != 0 })
	gotP := g.readF32(pp, n)
	near(t, "params", gotP, rp, 1e-6, 1e-7)
	near(t, "m", g.readF32(pm, n), rm, 1e-5, 1e-7)
	near(t, "v", g.readF32(pv, n), rv, 1e-5, 1e-7)
	near(t, "params bf16", g.readBF(pb, n), gotP, bf16Tol, 0)

	// No decay mask (all decay), no bf16 copy, another step.
	h.step = 1
	pp, pm, pv = g.f32(p), g.f32(m), g.f32(v)
	g.ok(g.d.AdamWBF16(pp, 0, pg, pm, pv, 0, 0, n, g.hyper(h)))
	rp, _, _ = adamRef(h, p, gr, m, v, func(int) bool { return true })
	near(t, "params, every element decaying", g.readF32(pp, n), rp, 1e-6, 1e-7)
	wantArg(t, "decay without chunk", g.d.AdamWBF16(pp, 0, pg, pm, pv, pd, 0, n, ph))
	wantArg(t, "no hyper", g.d.AdamWBF16(pp, 0, pg, pm, pv, 0, 0, n, 0))
}
