package hostloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// SwiGLU's C loops give the Go loops' bits at every instruction set, over
// row widths around the vectors' widths, special values, NaN, infinities
// and arguments past exp's clamp, a and b read from packed rows [a | b].
func TestSwiGLUMatchesGo(t *testing.T) { forLevels(t, testSwiGLUMatchesGo) }

func testSwiGLUMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, f := range append(widths, 4099) {
		for _, sp := range []bool{false, true} {
			const rows = 3
			ab := randRows(r, 2*rows*f, sp, 6)
			special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 120, -120}
			copy(ab, special)             // row 0's a
			copy(ab[len(ab)-f:], special) // the last row's b
			yc, yg := make([]float32, rows*f), make([]float32, rows*f)
			cSwiGLU(yc, ab, rows, f)
			goSwiGLU(yg, ab, rows, f)
			bitsEqual(t, "SwiGLU", yc, yg)
			dy := randRows(r, rows*f, sp, 1)
			dac, dag := make([]float32, 2*rows*f), make([]float32, 2*rows*f)
			cSwiGLUBackward(dac, dy, ab, rows, f)
			goSwiGLUBackward(dag, dy, ab, rows, f)
			bitsEqual(t, "SwiGLUBackward", dac, dag)
		}
	}
}

// The Go loops against the element formulas, row by row: y from row r's a
// and b (not its neighbours'), da and db in their halves of dab.
func TestSwiGLUPackedRows(t *testing.T) {
	const rows, f = 2, 3
	ab := []float32{0.5, -1, 2, 3, 4, -5, 1.5, 0.25, -2, -1, 0.5, 2}
	dy := []float32{1, 2, 3, -1, -2, 0.5}
	y, dab := make([]float32, rows*f), make([]float32, 2*rows*f)
	goSwiGLU(y, ab, rows, f)
	goSwiGLUBackward(dab, dy, ab, rows, f)
	for r := range rows {
		for i := range f {
			a, b, d := float64(ab[2*r*f+i]), float64(ab[2*r*f+f+i]), float64(dy[r*f+i])
			s := 1 / (1 + math.Exp(-a))
			want := map[string][2]float64{
				"y":  {float64(y[r*f+i]), a * s * b},
				"da": {float64(dab[2*r*f+i]), d * b * (s + a*s*(1-s))},
				"db": {float64(dab[2*r*f+f+i]), d * a * s},
			}
			for name, p := range want {
				if math.Abs(p[0]-p[1]) > 1e-5*(1+math.Abs(p[1])) {
					t.Errorf("row %d column %d: %s = %g, want %g", r, i, name, p[0], p[1])
				}
			}
		}
	}
}

// The loops alone, C against Go, at llama-tiny's size: SwiGLU over
// (1024, 352), forward and backward.
func BenchmarkSwiGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, f = 1024, 352
	ab, dy := randRows(r, 2*rows*f, false, 3), randRows(r, rows*f, false, 1)
	y, dab := make([]float32, rows*f), make([]float32, 2*rows*f)
	for _, impl := range []struct {
		name     string
		fwd      func(y, ab []float32, rows, f int)
		bwd      func(dab, dy, ab []float32, rows, f int)
		wantsCgo bool
	}{{"c", cSwiGLU, cSwiGLUBackward, true}, {"go", goSwiGLU, goSwiGLUBackward, false}} {
		b.Run(impl.name, func(b *testing.B) {
			if impl.wantsCgo {
				needC(b)
			}
			b.SetBytes(int64(4 * 8 * rows * f)) // three read and two written each way, roughly
			for b.Loop() {
				impl.fwd(y, ab, rows, f)
				impl.bwd(dab, dy, ab, rows, f)
			}
		})
	}
}
