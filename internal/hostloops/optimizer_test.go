package hostloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSGDMatchesGo(t *testing.T) {
	forCases(t, func(t *testing.T, r *rand.Rand, n, off int, sp bool) {
		g := randElems(r, n, sp)
		for _, wd := range []float32{0, 1e-4} {
			pc, pg := two(r, n, off, sp)
			cSGD(pc, g, 0.05, wd)
			goSGD(pg, g, 0.05, wd)
			bitsEqual(t, "SGD", pc, pg)
			for _, nesterov := range []bool{false, true} {
				for _, first := range []bool{true, false} {
					pc, pg := two(r, n, off, sp)
					bc, bg := two(r, n, off, sp)
					cSGDMomentum(pc, g, bc, 0.05, wd, 0.9, nesterov, first)
					goSGDMomentum(pg, g, bg, 0.05, wd, 0.9, nesterov, first)
					bitsEqual(t, "SGDMomentum params", pc, pg)
					bitsEqual(t, "SGDMomentum buffer", bc, bg)
				}
			}
		}
	})
}

func TestAdamMatchesGo(t *testing.T) {
	args := []AdamArgs{
		{Decay: 1, Beta1: 0.9, Beta2: 0.999, C1: 0.1, C2: 1 - float32(0.999), Eps: 1e-8, StepSize: 1e-3 / 0.1, BC2Sqrt: 0.0316},
		{Decay: 1, L2: 1e-4, Beta1: 0.9, Beta2: 0.999, C1: 0.1, C2: 1 - float32(0.999), Eps: 1e-8, StepSize: 5e-3, BC2Sqrt: 0.2},
		{Decay: 1 - 1e-5, Beta1: 0.8, Beta2: 0.99, C1: 0.2, C2: 1 - float32(0.99), Eps: 1e-6, StepSize: 1e-3, BC2Sqrt: 0.9},
	}
	forCases(t, func(t *testing.T, r *rand.Rand, n, off int, sp bool) {
		g := randElems(r, n, sp)
		for k := range args {
			a := &args[k]
			pc, pg := two(r, n, off, sp)
			mc, mg := two(r, n, off, sp)
			vc, vg := two(r, n, off, false)
			for i := range vc { // a second moment is not negative
				vc[i] = float32(math.Abs(float64(vc[i])))
				vg[i] = vc[i]
			}
			cAdam(pc, g, mc, vc, a)
			goAdam(pg, g, mg, vg, a)
			bitsEqual(t, "Adam params", pc, pg)
			bitsEqual(t, "Adam m", mc, mg)
			bitsEqual(t, "Adam v", vc, vg)
		}
	})
}

func BenchmarkSGDMomentum(b *testing.B) {
	buf := make([]float32, 134_000)
	benchLoop(b, 134_000,
		func(p, g []float32) { cSGDMomentum(p, g, buf, 1e-9, 0, 0.9, false, false) },
		func(p, g []float32) { goSGDMomentum(p, g, buf, 1e-9, 0, 0.9, false, false) })
}
