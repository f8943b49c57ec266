package cudatest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
)

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// TestGeluBF16 is sdc_gelu and sdc_gelu_backward on bf16 against the tanh
// form in float64 (and a central difference for the derivative), and the
// library's argument checks.
func TestGeluBF16(t *testing.T) {
	g := newGPU(t)
	const bf = cudalib.BFloat16
	const n = 13 // not a multiple of 8, an odd number of bf16
	x, dy := g.randBF(n+1, 2, 0), g.randBF(n+1, 1, 0)
	x[n], dy[n] = 7, 7 // past the end: never written
	px, pdy, py := g.bf(x), g.bf(dy), g.bf(make([]float64, n+1))
	g.ok(g.d.Gelu(bf, py, px, n))
	ry, rd := make([]float64, n+1), make([]float64, n+1)
	for i := 0; i < n; i++ {
		ry[i] = geluTanh(x[i])
		const h = 1e-6
		rd[i] = dy[i] * (geluTanh(x[i]+h) - geluTanh(x[i]-h)) / (2 * h)
	}
	rd[n] = 7
	near(t, "gelu", g.readBF(py, n+1), ry, bf16Tol, 1e-9)
	g.ok(g.d.GeluBackward(bf, pdy, pdy, px, n)) // in place
	near(t, "gelu backward (in place)", g.readBF(pdy, n+1), rd, bf16Tol, 1e-7)
	g.ok(g.d.Gelu(bf, py, px, 0))
	wantArg(t, "n<0", g.d.Gelu(bf, py, px, -1))
	wantArg(t, "unaligned", g.d.GeluBackward(bf, pdy, pdy, px+8, n))
	wantArg(t, "NULL", g.d.Gelu(bf, 0, px, n))
	wantArg(t, "dtype", g.d.Gelu(cudalib.DType(7), py, px, n))
	if err := g.d.Gelu(cudalib.Float32, py, px+8, 2); err != nil {
		t.Errorf("fp32 GELU on a 4-byte aligned pointer: %v", err)
	}
}
