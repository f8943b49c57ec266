package computetest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunSwiGLU is the conformance suite of compute.SwiGLUs; it skips when e
// has no SwiGLUs.
func RunSwiGLU(t *testing.T, e compute.Engine) {
	g := require[compute.SwiGLUs](t, e, "SwiGLU")
	t.Run("Reference", testSwiGLUReference)
	t.Run("SwiGLU", func(t *testing.T) { testSwiGLU(t, e, g) })
	t.Run("Panics", func(t *testing.T) {
		a, b := e.Alloc(4, 5), e.Alloc(4, 5)
		expectPanic(t, "SwiGLU with y of another size", func() { g.SwiGLU(e.Alloc(4, 4), a, b) }, "SwiGLU")
		expectPanic(t, "SwiGLU with y = a", func() { g.SwiGLU(a, a, b) }, "SwiGLU")
		expectPanic(t, "SwiGLUBackward with db = dy", func() { d := e.Alloc(4, 5); g.SwiGLUBackward(e.Alloc(4, 5), d, d, a, b) }, "SwiGLUBackward")
	})
	t.Run("NoAllocs", func(t *testing.T) {
		r := rng(81)
		a, b, y := tensorOf(e, randVals(r, 1000), 10, 100), tensorOf(e, randVals(r, 1000), 10, 100), e.Alloc(10, 100)
		db := e.Alloc(10, 100)
		noAllocs(t, map[string]func(){
			"SwiGLU":         func() { g.SwiGLU(y, a, b) },
			"SwiGLUBackward": func() { g.SwiGLUBackward(y, db, y, a, b) },
		})
	})
}

// refSiLU is silu(a) = a·σ(a) and its derivative σ·(1 + a·(1-σ)), in
// float64.
func refSiLU(a float64) (y, dydx float64) {
	s := 1 / (1 + math.Exp(-a))
	return a * s, s * (1 + a*(1-s))
}

// The derivative in refSiLU agrees with central differences of silu.
func testSwiGLUReference(t *testing.T) {
	r := rng(82)
	a, b, dy := randVals(r, 40), randVals(r, 40), randVals(r, 40)
	for i := range a {
		a[i] *= 8
	}
	forward := func() []float64 {
		y := make([]float64, len(a))
		for i := range a {
			s, _ := refSiLU(float64(a[i]))
			y[i] = s * float64(b[i])
		}
		return y
	}
	loss := func() float64 { return dot64(forward(), dy) }
	da, db := refSwiGLUBackward(dy, a, b)
	checkReferenceFD(t, "da", a, da, loss, 1e-4)
	checkReferenceFD(t, "db", b, db, loss, 1e-4)
}

// refSwiGLUBackward is da = dy·b·silu'(a), db = dy·silu(a) in float64.
func refSwiGLUBackward(dy, a, b []float32) (da, db []float64) {
	da, db = make([]float64, len(a)), make([]float64, len(a))
	for i := range a {
		s, d := refSiLU(float64(a[i]))
		da[i] = float64(dy[i]) * float64(b[i]) * d
		db[i] = float64(dy[i]) * s
	}
	return da, db
}

func testSwiGLU(t *testing.T, e compute.Engine, g compute.SwiGLUs) {
	for _, shape := range [][]int{{1}, {7}, {3, 7, 5}, {1031}, {64, 33}} {
		size := compute.ShapeSize("test", "SwiGLU", shape)
		r := rng(uint64(size) + 80)
		av, bv, dyv := randVals(r, size), randVals(r, size), randVals(r, size)
		for i := range av {
			av[i] *= 8
		}
		// The tails: large |a|, where σ saturates, and past exp's clamp.
		edge := []float32{0, -0.5, 3, -3, 10, -10, 20, -20, 100, -100}
		copy(av, edge[:min(len(edge), size)])
		a, b := tensorOf(e, av, shape...), tensorOf(e, bv, shape...)
		y := tensorOf(e, nanVals(size), shape...)
		g.SwiGLU(y, a, b)
		wantY := make([]float64, size)
		for i := range av {
			s, _ := refSiLU(float64(av[i]))
			wantY[i] = s * float64(bv[i])
		}
		checkNear(t, "SwiGLU", read(e, y), wantY, 2e-6)
		wantDA, wantDB := refSwiGLUBackward(dyv, av, bv)
		da, db, dy := tensorOf(e, nanVals(size), shape...), tensorOf(e, nanVals(size), shape...), tensorOf(e, dyv, shape...)
		g.SwiGLUBackward(da, db, dy, a, b)
		checkNear(t, "SwiGLUBackward da", read(e, da), wantDA, 2e-6)
		checkNear(t, "SwiGLUBackward db", read(e, db), wantDB, 2e-6)
		db2 := tensorOf(e, nanVals(size), shape...)
		g.SwiGLUBackward(dy, db2, dy, a, b) // da in place of dy
		checkNear(t, "SwiGLUBackward da in place", read(e, dy), wantDA, 2e-6)
		checkNear(t, "SwiGLUBackward db (da in place)", read(e, db2), wantDB, 2e-6)
	}
}
