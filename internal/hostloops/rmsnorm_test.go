package hostloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// RMSNorm's C loops give the Go loops' bits at every instruction set:
// widths around the lanes' eight, several rows, special values and a NaN
// row, the backward both writing and adding dx, dw added to in row order.
func TestRMSNormMatchesGo(t *testing.T) { forLevels(t, testRMSNormMatchesGo) }

func testRMSNormMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range append(widths, 2048) {
		for _, sp := range []bool{false, true} {
			const rows = 5
			x := randRows(r, rows*c, sp, 3)
			x[c] = float32(math.NaN()) // the second row
			w := randRows(r, c, false, 1)
			yc, yg := make([]float32, rows*c), make([]float32, rows*c)
			rc, rg := make([]float32, rows), make([]float32, rows)
			cRMSNorm(yc, rc, x, w, rows, c, 1e-5)
			goRMSNorm(yg, rg, x, w, rows, c, 1e-5)
			bitsEqual(t, "RMSNorm y", yc, yg)
			bitsEqual(t, "RMSNorm rstd", rc, rg)
			dy := randRows(r, rows*c, sp, 1)
			for _, add := range []bool{false, true} {
				d0, w0 := randRows(r, rows*c, false, 1), randRows(r, c, false, 1)
				dxc, dxg, dwc, dwg := clone(d0), clone(d0), clone(w0), clone(w0)
				cRMSNormBackward(dxc, dwc, dy, x, w, rg, rows, c, add)
				goRMSNormBackward(dxg, dwg, dy, x, w, rg, rows, c, add)
				bitsEqual(t, "RMSNormBackward dx", dxc, dxg)
				bitsEqual(t, "RMSNormBackward dw", dwc, dwg)
			}
		}
	}
}

// The loops alone, C against Go, at llama-tiny's size: RMSNorm over
// (1024, 128), forward and backward.
func BenchmarkRMSNorm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, c = 1024, 128
	x, w, dy := randRows(r, rows*c, false, 3), randRows(r, c, false, 1), randRows(r, rows*c, false, 1)
	y, rstd, dx, dw := make([]float32, rows*c), make([]float32, rows), make([]float32, rows*c), make([]float32, c)
	for _, impl := range []struct {
		name     string
		fwd      func(y, rstd, x, w []float32, rows, c int, eps float32)
		bwd      func(dx, dw, dy, x, w, rstd []float32, rows, c int, addDX bool)
		wantsCgo bool
	}{{"c", cRMSNorm, cRMSNormBackward, true}, {"go", goRMSNorm, goRMSNormBackward, false}} {
		b.Run(impl.name, func(b *testing.B) {
			if impl.wantsCgo {
				needC(b)
			}
			for b.Loop() {
				impl.fwd(y, rstd, x, w, rows, c, 1e-5)
				impl.bwd(dx, dw, dy, x, w, rstd, rows, c, false)
			}
		})
	}
}
