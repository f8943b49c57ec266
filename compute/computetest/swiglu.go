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
		ab := e.Alloc(4, 10)
		expectPanic(t, "SwiGLU with y of another size", func() { g.SwiGLU(e.Alloc(4, 4), ab) }, "SwiGLU")
		expectPanic(t, "SwiGLU with ab not two of y's rows", func() { g.SwiGLU(e.Alloc(5, 4), e.Alloc(4, 10)) }, "SwiGLU")
		expectPanic(t, "SwiGLUBackward with dab = ab", func() { g.SwiGLUBackward(ab, e.Alloc(4, 5), ab) }, "SwiGLUBackward")
		expectPanic(t, "SwiGLUBackward with dab of another size", func() { g.SwiGLUBackward(e.Alloc(4, 5), e.Alloc(4, 5), ab) }, "SwiGLUBackward")
	})
	t.Run("NoAllocs", func(t *testing.T) {
		r := rng(81)
		ab, y := tensorOf(e, randVals(r, 2000), 10, 200), e.Alloc(10, 100)
		dab := e.Alloc(10, 200)
		noAllocs(t, map[string]func(){
			"SwiGLU":         func() { g.SwiGLU(y, ab) },
			"SwiGLUBackward": func() { g.SwiGLUBackward(dab, y, ab) },
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

// packRows lays a and b (rows of f) out as rows [a | b] of 2f.
func packRows(a, b []float32, f int) []float32 {
	ab := make([]float32, 0, 2*len(a))
	for r := 0; r < len(a); r += f {
		ab = append(append(ab, a[r:r+f]...), b[r:r+f]...)
	}
	return ab
}

func testSwiGLU(t *testing.T, e compute.Engine, g compute.SwiGLUs) {
	for _, shape := range [][]int{{1}, {7}, {3, 7, 5}, {1031}, {64, 33}} {
		size := compute.ShapeSize("test", "SwiGLU", shape)
		f := shape[len(shape)-1]
		wide := append(append([]int(nil), shape[:len(shape)-1]...), 2*f)
		r := rng(uint64(size) + 80)
		av, bv, dyv := randVals(r, size), randVals(r, size), randVals(r, size)
		for i := range av {
			av[i] *= 8
		}
		// The tails: large |a|, where σ saturates, and past exp's clamp.
		edge := []float32{0, -0.5, 3, -3, 10, -10, 20, -20, 100, -100}
		copy(av, edge[:min(len(edge), size)])
		ab := tensorOf(e, packRows(av, bv, f), wide...)
		y := tensorOf(e, nanVals(size), shape...)
		g.SwiGLU(y, ab)
		wantY := make([]float64, size)
		for i := range av {
			s, _ := refSiLU(float64(av[i]))
			wantY[i] = s * float64(bv[i])
		}
		checkNear(t, "SwiGLU", read(e, y), wantY, 2e-6)
		wantDA, wantDB := refSwiGLUBackward(dyv, av, bv)
		dab, dy := tensorOf(e, nanVals(2*size), wide...), tensorOf(e, dyv, shape...)
		g.SwiGLUBackward(dab, dy, ab)
		got := read(e, dab)
		gotDA, gotDB := make([]float32, 0, size), make([]float32, 0, size)
		for o := 0; o < len(got); o += 2 * f {
			gotDA, gotDB = append(gotDA, got[o:o+f]...), append(gotDB, got[o+f:o+2*f]...)
		}
		checkNear(t, "SwiGLUBackward da", gotDA, wantDA, 2e-6)
		checkNear(t, "SwiGLUBackward db", gotDB, wantDB, 2e-6)
	}
}
