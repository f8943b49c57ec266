package hostloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFoldsMatchGo(t *testing.T) {
	forCases(t, func(t *testing.T, r *rand.Rand, n, off int, sp bool) {
		x, y := randElems(r, n, sp), randElems(r, n, sp)
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
		x := randElems(r, n, sp)
		if c, g := cAllFinite(x), goAllFinite(x); c != g {
			t.Fatalf("AllFinite of %d elements: C %v, Go %v", n, c, g)
		}
		// One bad element anywhere, the last one included, is found.
		clean := randElems(r, n, false)
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

func BenchmarkAcc1(b *testing.B) { benchLoop(b, 134_000, cAcc1, goAcc1) }

func BenchmarkAllFinite(b *testing.B) {
	benchLoop(b, 269_000, func(x, _ []float32) { cAllFinite(x) }, func(x, _ []float32) { goAllFinite(x) })
}
