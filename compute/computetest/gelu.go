package computetest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunGELU is the conformance suite of compute.GELUs; it skips when e has
// no GELUs.
func RunGELU(t *testing.T, e compute.Engine) {
	g := require[compute.GELUs](t, e, "GELU")
	t.Run("GELU", func(t *testing.T) { testGELU(t, e, g) })
	t.Run("NoAllocs", func(t *testing.T) {
		x, y := tensorOf(e, randVals(rng(31), 1000), 10, 100), e.Alloc(10, 100)
		noAllocs(t, map[string]func(){
			"GELU":         func() { g.GELU(y, x) },
			"GELUBackward": func() { g.GELUBackward(y, y, x) },
		})
	})
}

// refGELU is GPT-2's tanh GELU and its derivative, in float64.
func refGELU(x float64) (y, dydx float64) {
	k := math.Sqrt(2 / math.Pi)
	u := k * (x + 0.044715*x*x*x)
	th := math.Tanh(u)
	y = 0.5 * x * (1 + th)
	dydx = 0.5*(1+th) + 0.5*x*(1-th*th)*k*(1+3*0.044715*x*x)
	return
}

func testGELU(t *testing.T, e compute.Engine, g compute.GELUs) {
	for _, shape := range [][]int{{1}, {7}, {3, 7, 5}, {1031}, {64, 33}} {
		size := compute.ShapeSize("test", "GELU", shape)
		r := rng(uint64(size))
		xv, dyv := randVals(r, size), randVals(r, size)
		for i := range xv {
			xv[i] *= 6
		}
		// The tails: large |x|, where tanh saturates.
		edge := []float32{0, -0.5, 3, -3, 10, -10, 20, -20, 100, -100}
		copy(xv, edge[:min(len(edge), size)])
		x := tensorOf(e, xv, shape...)
		y := tensorOf(e, nanVals(size), shape...)
		g.GELU(y, x)
		wantY, wantD := make([]float64, size), make([]float64, size)
		for i, v := range xv {
			yy, d := refGELU(float64(v))
			wantY[i], wantD[i] = yy, d*float64(dyv[i])
		}
		checkNear(t, "GELU", read(e, y), wantY, 1e-6)
		dx := tensorOf(e, nanVals(size), shape...)
		dy := tensorOf(e, dyv, shape...)
		g.GELUBackward(dx, dy, x)
		checkNear(t, "GELUBackward", read(e, dx), wantD, 2e-6)
		g.GELUBackward(dy, dy, x) // in place
		checkNear(t, "GELUBackward in place", read(e, dy), wantD, 2e-6)
	}
	x := e.Alloc(4, 5)
	expectPanic(t, "GELU with y of another size", func() { g.GELU(e.Alloc(4, 4), x) }, "GELU")
	expectPanic(t, "GELUBackward with dy of another size", func() { g.GELUBackward(e.Alloc(4, 5), e.Alloc(4), x) }, "GELUBackward")
}
