package hostloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// SwiGLU's C loops give the Go loops' bits at every instruction set, over
// lengths around the vectors' widths, special values, NaN, infinities and
// arguments past exp's clamp; the backward also in place over dy.
func TestSwiGLUMatchesGo(t *testing.T) { forLevels(t, testSwiGLUMatchesGo) }

func testSwiGLUMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range append(widths, 4099) {
		for _, sp := range []bool{false, true} {
			a := randRows(r, n, sp, 6)
			a = append(a, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 120, -120)
			b := randRows(r, len(a), sp, 2)
			yc, yg := make([]float32, len(a)), make([]float32, len(a))
			cSwiGLU(yc, a, b)
			goSwiGLU(yg, a, b)
			bitsEqual(t, "SwiGLU", yc, yg)
			dy := randRows(r, len(a), sp, 1)
			dac, dbc, dag, dbg := make([]float32, len(a)), make([]float32, len(a)), make([]float32, len(a)), make([]float32, len(a))
			cSwiGLUBackward(dac, dbc, dy, a, b)
			goSwiGLUBackward(dag, dbg, dy, a, b)
			bitsEqual(t, "SwiGLUBackward da", dac, dag)
			bitsEqual(t, "SwiGLUBackward db", dbc, dbg)
			d2, db2 := clone(dy), make([]float32, len(a))
			cSwiGLUBackward(d2, db2, d2, a, b)
			bitsEqual(t, "SwiGLUBackward da in place", d2, dag)
			bitsEqual(t, "SwiGLUBackward db beside da in place", db2, dbg)
		}
	}
}

// The loops alone, C against Go, at llama-tiny's size: SwiGLU over
// (1024, 352), forward and backward.
func BenchmarkSwiGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 1024 * 352
	a, bv, dy := randRows(r, n, false, 3), randRows(r, n, false, 1), randRows(r, n, false, 1)
	y, da, db := make([]float32, n), make([]float32, n), make([]float32, n)
	for _, impl := range []struct {
		name     string
		fwd      func(y, a, b []float32)
		bwd      func(da, db, dy, a, b []float32)
		wantsCgo bool
	}{{"c", cSwiGLU, cSwiGLUBackward, true}, {"go", goSwiGLU, goSwiGLUBackward, false}} {
		b.Run(impl.name, func(b *testing.B) {
			if impl.wantsCgo {
				needC(b)
			}
			b.SetBytes(int64(4 * 8 * n)) // three read and two written each way, roughly
			for b.Loop() {
				impl.fwd(y, a, bv)
				impl.bwd(da, db, dy, a, bv)
			}
		})
	}
}
