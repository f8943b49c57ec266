package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestClipGlobalNorm(t *testing.T) {
	// (3, 4) has norm 5; clipping to 1 scales by 1/(5 + 1e-6).
	g := []float32{3, 4}
	norm := ClipGlobalNorm(g, 1)
	near(t, "norm", norm, 5, 0)
	near(t, "g[0]", float64(g[0]), 3/5.000001, 1e-7) // 0.59999988
	near(t, "g[1]", float64(g[1]), 4/5.000001, 1e-7) // 0.79999984
	near(t, "clipped norm", GlobalNorm(g), 1, 1e-6)

	// Under the limit, and exactly at it, nothing changes.
	for _, maxNorm := range []float32{10, 5} {
		g := []float32{3, 4}
		norm := ClipGlobalNorm(g, maxNorm)
		near(t, "norm", norm, 5, 0)
		sameBits(t, "unclipped grads", g, []float32{3, 4})
	}
}

func TestGlobalNorm(t *testing.T) {
	// Lengths that leave 0 to 3 elements after the last full group of 4.
	for n, want := range map[int]float64{0: 0, 1: 1, 3: 3, 7: 7, 8: 8, 9: 9, 10: 10} {
		x := make([]float32, n)
		for i := range x {
			x[i] = 1
		}
		near(t, "norm", GlobalNorm(x)*GlobalNorm(x), want, 1e-12)
	}
	near(t, "norm", GlobalNorm([]float32{2, 3, 0, 0, 0, 0, 0, 0, 6}), 7, 0) // √(4+9+36)

	// The documented order of summation, bit for bit, for lengths with
	// every remainder mod 4.
	rng := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1000, 1001, 1002, 1003} {
		x := randomVec(rng, n, 1)
		q := n / 4
		var lane [4]float64
		for i, v := range x {
			lane[min(i/q, 3)] += float64(v) * float64(v)
		}
		want := math.Sqrt((lane[0] + lane[1]) + (lane[2] + lane[3]))
		if got := GlobalNorm(x); got != want {
			t.Errorf("n=%d: GlobalNorm = %v, want %v from the documented order", n, got, want)
		}
	}
}

func TestClipFactor(t *testing.T) {
	s, ok := ClipFactor(10, 2)
	if !ok || s != float32(2/(10+1e-6)) {
		t.Errorf("ClipFactor(10, 2) = %g, %v", s, ok)
	}
	if s, ok := ClipFactor(2, 2); ok || s != 1 {
		t.Errorf("ClipFactor(2, 2) = %g, %v, want 1, false", s, ok)
	}
	if s, ok := ClipFactor(math.NaN(), 2); ok || s != 1 {
		t.Errorf("ClipFactor(NaN, 2) = %g, %v, want 1, false", s, ok)
	}
	if s, ok := ClipFactor(math.Inf(1), 2); !ok || s != 0 {
		t.Errorf("ClipFactor(+Inf, 2) = %g, %v, want 0, true", s, ok)
	}
	wantPanic(t, "max norm 0", func() { ClipFactor(1, 0) })
	wantPanic(t, "max norm NaN", func() { ClipFactor(1, float32(math.NaN())) })
}

func TestScale(t *testing.T) {
	x := []float32{1, -2, 0.5}
	Scale(x, 0.5)
	sameBits(t, "scaled", x, []float32{0.5, -1, 0.25})
}

func TestClipDoesNotAllocate(t *testing.T) {
	g := randomVec(rand.New(rand.NewPCG(17, 18)), 1000, 1)
	if a := testing.AllocsPerRun(10, func() { ClipGlobalNorm(g, 0.5) }); a != 0 {
		t.Errorf("ClipGlobalNorm allocates %g times per call", a)
	}
}
