package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// special values every input mixes in: the cases where a careless loop
// (or a compiler's rewrite) gives other bits.
var special = []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)),
	float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7fc12345), // a NaN with a payload
	math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-39, -1e-39, math.MaxFloat32, -math.MaxFloat32,
	1e-20, 3e38}

func randSlice(r *rand.Rand, n int, withSpecial bool) []float32 {
	s := make([]float32, n)
	for i := range s {
		switch {
		case withSpecial && r.IntN(8) == 0:
			s[i] = special[r.IntN(len(special))]
		case r.IntN(4) == 0:
			s[i] = float32(r.NormFloat64() * 1e-3)
		default:
			s[i] = float32(r.NormFloat64())
		}
	}
	return s
}

func bitsEqual(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != got[i] && want[i] != want[i] {
			continue // both NaN: the payload and sign may differ (see the package doc)
		}
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d of %d: C %v (%#08x), Go %v (%#08x)", what, i, len(want),
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// lengths covers the vector tails and the loops' main bodies; offsets moves
// the slices off their allocation's alignment.
var lengths = []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 256, 257, 1000, 4099}

func forCases(t *testing.T, f func(t *testing.T, r *rand.Rand, n, off int, sp bool)) {
	if !cAvailable {
		t.Skip("built without cgo: only the Go loops exist")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range lengths {
		for off := range 3 {
			for _, sp := range []bool{false, true} {
				f(t, r, n, off, sp)
			}
		}
	}
}

// two returns two copies of a random slice of n elements starting off
// elements into their backing arrays.
func two(r *rand.Rand, n, off int, sp bool) (a, b []float32) {
	s := randSlice(r, n+off, sp)
	a = append([]float32(nil), s...)[off:]
	b = append([]float32(nil), s...)[off:]
	return a, b
}

func TestFoldsMatchGo(t *testing.T) {
	forCases(t, func(t *testing.T, r *rand.Rand, n, off int, sp bool) {
		x, y := randSlice(r, n, sp), randSlice(r, n, sp)
		dc, dg := two(r, n, off, sp)
		cSum2(dc, x, y)
		goSum2(dg, x, y)
		bitsEqual(t, "Sum2", dc, dg)
		cAcc1(dc, x)
		goAcc1(dg, x)
		bitsEqual(t, "Acc1", dc, dg)
		cAcc2(dc, x, y)
		goAcc2(dg, x, y)
		bitsEqual(t, "Acc2", dc, dg)
		cScale(dc, 0.37)
		goScale(dg, 0.37)
		bitsEqual(t, "Scale", dc, dg)
	})
}

func TestAllFiniteMatchesGo(t *testing.T) {
	forCases(t, func(t *testing.T, r *rand.Rand, n, off int, sp bool) {
		x := randSlice(r, n, sp)
		if c, g := cAllFinite(x), goAllFinite(x); c != g {
			t.Fatalf("AllFinite of %d elements: C %v, Go %v", n, c, g)
		}
		// One bad element anywhere, the last one included, is found.
		clean := randSlice(r, n, false)
		if !cAllFinite(clean) {
			t.Fatalf("AllFinite: C finds a non-finite value in finite data of %d", n)
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
			i := r.IntN(n)
			if r.IntN(3) == 0 {
				i = n - 1
			}
			v := clean[i]
			clean[i] = bad
			if cAllFinite(clean) || goAllFinite(clean) {
				t.Fatalf("AllFinite misses %v at %d of %d (C %v, Go %v)", bad, i, n, cAllFinite(clean), goAllFinite(clean))
			}
			clean[i] = v
		}
	})
}

func TestActivationsMatchGo(t *testing.T) {
	forCases(t, func(t *testing.T, r *rand.Rand, n, off int, sp bool) {
		y := randSlice(r, n, sp)
		dc, dg := two(r, n, off, sp)
		cReLUMask(dc, y)
		goReLUMask(dg, y)
		bitsEqual(t, "ReLUMask", dc, dg)

		for _, cols := range []int{1, 3, 10, 64, 256} {
			rows := max(1, n/cols)
			bias := randSlice(r, cols, sp)
			for _, b := range [][]float32{bias, nil} {
				for _, relu := range []bool{true, false} {
					yc, yg := two(r, rows*cols, off, sp)
					cBiasAct(yc, b, rows, cols, relu)
					goBiasAct(yg, b, rows, cols, relu)
					bitsEqual(t, "BiasAct", yc, yg)
				}
			}
			sc, sg := two(r, cols, off, sp)
			d := randSlice(r, rows*cols, sp)
			cColSums(sc, d, rows, cols)
			goColSums(sg, d, rows, cols)
			bitsEqual(t, "ColSums", sc, sg)
		}
	})
}

func TestSGDMatchesGo(t *testing.T) {
	forCases(t, func(t *testing.T, r *rand.Rand, n, off int, sp bool) {
		g := randSlice(r, n, sp)
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

// The exported functions check lengths, whichever loop runs.
func TestShortSlicesPanic(t *testing.T) {
	for name, f := range map[string]func(){
		"Sum2":     func() { Sum2(make([]float32, 4), make([]float32, 4), make([]float32, 3)) },
		"Acc1":     func() { Acc1(make([]float32, 100), make([]float32, 99)) },
		"ReLUMask": func() { ReLUMask(make([]float32, 100), make([]float32, 99)) },
		"BiasAct":  func() { BiasAct(make([]float32, 100), make([]float32, 9), 10, 10, true) },
		"ColSums":  func() { ColSums(make([]float32, 10), make([]float32, 99), 10, 10) },
		"SGDMomentum": func() {
			SGDMomentum(make([]float32, 100), make([]float32, 100), make([]float32, 50), 1, 0, 0.9, false, false)
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with a short slice did not panic", name)
				}
			}()
			f()
		}()
	}
}

func benchLoop(b *testing.B, n int, c, g func([]float32, []float32)) {
	r := rand.New(rand.NewPCG(3, 4))
	x, y := randSlice(r, n, false), randSlice(r, n, false)
	for _, v := range []struct {
		name string
		f    func([]float32, []float32)
	}{{"go", g}, {"c", c}} {
		if v.name == "c" && !cAvailable {
			continue
		}
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for b.Loop() {
				v.f(x, y)
			}
		})
	}
}

func BenchmarkReLUMask(b *testing.B) { benchLoop(b, 128*256, cReLUMask, goReLUMask) }
func BenchmarkAcc1(b *testing.B)     { benchLoop(b, 134_000, cAcc1, goAcc1) }
func BenchmarkSGDMomentum(b *testing.B) {
	buf := make([]float32, 134_000)
	benchLoop(b, 134_000,
		func(p, g []float32) { cSGDMomentum(p, g, buf, 1e-9, 0, 0.9, false, false) },
		func(p, g []float32) { goSGDMomentum(p, g, buf, 1e-9, 0, 0.9, false, false) })
}
func BenchmarkAllFinite(b *testing.B) {
	benchLoop(b, 269_000, func(x, _ []float32) { cAllFinite(x) }, func(x, _ []float32) { goAllFinite(x) })
}
func BenchmarkBiasReLU(b *testing.B) {
	bias := make([]float32, 256)
	benchLoop(b, 128*256,
		func(y, _ []float32) { cBiasAct(y, bias, 128, 256, true) },
		func(y, _ []float32) { goBiasAct(y, bias, 128, 256, true) })
}

// The ReLU mask zeroes d exactly where y <= 0, for every class of float32
// (±0, ±subnormal, ±Inf, ±NaN), as the plain comparison does; in both loops.
func TestReLUMaskEdgeCases(t *testing.T) {
	nan := float32(math.NaN())
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-45, -1e-45, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), nan, -nan, math.Float32frombits(0x7fffffff), math.Float32frombits(0xff800001)}
	impls := map[string]func(d, y []float32){"go": goReLUMask}
	if cAvailable {
		impls["c"] = cReLUMask
	}
	for name, mask := range impls {
		for _, y := range vals {
			for _, d := range vals {
				const n = minC + 3 // long enough for the C loop's vector body
				got, ys := make([]float32, n), make([]float32, n)
				for i := range got {
					got[i], ys[i] = d, y
				}
				mask(got, ys)
				want := d
				if y <= 0 {
					want = 0
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want) {
						t.Fatalf("%s: y %v (bits %#x), d %v: got %v, want %v", name, y, math.Float32bits(y), d, got[i], want)
					}
				}
			}
		}
	}
}

// AllFinite finds every NaN and Inf at every position, in both loops and
// through the exported function (which picks by length).
func TestAllFiniteFindsEveryBadValue(t *testing.T) {
	impls := map[string]func([]float32) bool{"go": goAllFinite, "AllFinite": AllFinite}
	if cAvailable {
		impls["c"] = cAllFinite
	}
	for name, f := range impls {
		for _, n := range []int{0, 1, 3, 4, 5, 8, 63, 64, 65, 1001} {
			if n == 0 && name == "c" {
				continue // the C entry point is never called with nothing
			}
			s := make([]float32, n)
			for i := range s {
				s[i] = float32(i) - 1e30
			}
			if !f(s) {
				t.Fatalf("%s, n=%d: finite values reported as not finite", name, n)
			}
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
				for i := range s {
					old := s[i]
					s[i] = bad
					if f(s) {
						t.Fatalf("%s, n=%d: %v at %d not found", name, n, bad, i)
					}
					s[i] = old
				}
			}
		}
	}
}

func TestAdamMatchesGo(t *testing.T) {
	args := []AdamArgs{
		{Decay: 1, Beta1: 0.9, Beta2: 0.999, C1: 0.1, C2: 1 - float32(0.999), Eps: 1e-8, StepSize: 1e-3 / 0.1, BC2Sqrt: 0.0316},
		{Decay: 1, L2: 1e-4, Beta1: 0.9, Beta2: 0.999, C1: 0.1, C2: 1 - float32(0.999), Eps: 1e-8, StepSize: 5e-3, BC2Sqrt: 0.2},
		{Decay: 1 - 1e-5, Beta1: 0.8, Beta2: 0.99, C1: 0.2, C2: 1 - float32(0.99), Eps: 1e-6, StepSize: 1e-3, BC2Sqrt: 0.9},
	}
	forCases(t, func(t *testing.T, r *rand.Rand, n, off int, sp bool) {
		g := randSlice(r, n, sp)
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
