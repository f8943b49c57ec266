package hostloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestGELUMatchesGo(t *testing.T) { forLevels(t, testGELUMatchesGo) }

func testGELUMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range append(widths, 4099) {
		for _, sp := range []bool{false, true} {
			x := randRows(r, n, sp, 3)
			x = append(x, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)))
			yc, yg := make([]float32, len(x)), make([]float32, len(x))
			cGELU(yc, x)
			goGELU(yg, x)
			bitsEqual(t, "GELU", yc, yg)
			dy := randRows(r, len(x), sp, 1)
			dc, dg := make([]float32, len(x)), make([]float32, len(x))
			cGELUBackward(dc, dy, x)
			goGELUBackward(dg, dy, x)
			bitsEqual(t, "GELUBackward", dc, dg)
			// In place over dy.
			d2 := clone(dy)
			cGELUBackward(d2, d2, x)
			bitsEqual(t, "GELUBackward in place", d2, dg)
		}
	}
}

// The loops alone, C against Go, at gpt-tiny sizes: GELU over (1024,512).
func BenchmarkGELU(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x := randRows(r, 1024*512, false, 1)
	y := make([]float32, len(x))
	b.Run("c", func(b *testing.B) {
		needC(b)
		b.SetBytes(int64(8 * len(x)))
		for b.Loop() {
			cGELU(y, x)
		}
	})
	b.Run("go", func(b *testing.B) {
		b.SetBytes(int64(8 * len(x)))
		for b.Loop() {
			goGELU(y, x)
		}
	})
}
