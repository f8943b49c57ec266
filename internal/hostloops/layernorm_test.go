package hostloops

import (
	"math/rand/v2"
	"testing"
)

func TestLayerNormMatchesGo(t *testing.T) { forLevels(t, testLayerNormMatchesGo) }

func testLayerNormMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range widths {
		for _, sp := range []bool{false, true} {
			rows := 1 + r.IntN(5)
			x := randRows(r, rows*c, sp, 3)
			w, b := randRows(r, c, sp, 1), randRows(r, c, sp, 1)
			yc, yg := make([]float32, rows*c), make([]float32, rows*c)
			mc, mg, rc, rg := make([]float32, rows), make([]float32, rows), make([]float32, rows), make([]float32, rows)
			cLayerNorm(yc, mc, rc, x, w, b, rows, c, 1e-5)
			goLayerNorm(yg, mg, rg, x, w, b, rows, c, 1e-5)
			bitsEqual(t, "LayerNorm y", yc, yg)
			bitsEqual(t, "LayerNorm mean", mc, mg)
			bitsEqual(t, "LayerNorm rstd", rc, rg)
			dy := randRows(r, rows*c, sp, 1)
			for _, add := range []bool{false, true} {
				dxc := randRows(r, rows*c, false, 1)
				dxg := clone(dxc)
				dwc, dbc := randRows(r, c, false, 1), randRows(r, c, false, 1)
				dwg, dbg := clone(dwc), clone(dbc)
				cLayerNormBackward(dxc, dwc, dbc, dy, x, w, mc, rc, rows, c, add)
				goLayerNormBackward(dxg, dwg, dbg, dy, x, w, mg, rg, rows, c, add)
				bitsEqual(t, "LayerNormBackward dx", dxc, dxg)
				bitsEqual(t, "LayerNormBackward dw", dwc, dwg)
				bitsEqual(t, "LayerNormBackward db", dbc, dbg)
			}
		}
	}
}

// The loops alone, C against Go, at gpt-tiny sizes: layer norm over 1024
// rows of 128.
func BenchmarkLayerNorm(b *testing.B) {
	const rows, c = 1024, 128
	r := rand.New(rand.NewPCG(3, 4))
	x, w, bb := randRows(r, rows*c, false, 1), randRows(r, c, false, 1), randRows(r, c, false, 1)
	y, m, rs := make([]float32, rows*c), make([]float32, rows), make([]float32, rows)
	b.Run("c", func(b *testing.B) {
		needC(b)
		b.SetBytes(int64(8 * rows * c))
		for b.Loop() {
			cLayerNorm(y, m, rs, x, w, bb, rows, c, 1e-5)
		}
	})
	b.Run("go", func(b *testing.B) {
		b.SetBytes(int64(8 * rows * c))
		for b.Loop() {
			goLayerNorm(y, m, rs, x, w, bb, rows, c, 1e-5)
		}
	})
}
