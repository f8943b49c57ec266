package hostloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The rotation's C loop gives the Go loop's bits at every instruction set:
// head sizes around the vectors' widths, rows wider than the heads turned
// (a packed qkv's), positions past T, both directions, out of place and in
// place, special values; the columns past width untouched.
func TestRotateMatchesGo(t *testing.T) { forLevels(t, testRotateMatchesGo) }

func testRotateMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct{ hs, heads, extra, t int }{
		{2, 1, 0, 1}, {4, 3, 2, 3}, {6, 2, 6, 5}, {16, 4, 0, 7}, {18, 2, 9, 4}, {34, 3, 34, 2}, {64, 16, 256, 3}, {128, 2, 1, 6},
	} {
		for _, sp := range []bool{false, true} {
			const rows = 9
			width := c.heads * c.hs
			ld := width + c.extra
			half := c.hs / 2
			x := randRows(r, rows*ld, sp, 2)
			cos, sin := randRows(r, c.t*half, false, 1), randRows(r, c.t*half, false, 1)
			cos[0], sin[0] = float32(math.Inf(1)), float32(math.NaN())
			for _, inv := range []bool{false, true} {
				yc, yg := randRows(r, rows*ld, false, 1), make([]float32, rows*ld)
				copy(yg, yc)
				cRotate(yc, x, cos, sin, rows, width, ld, c.hs, c.t, inv)
				goRotate(yg, x, cos, sin, rows, width, ld, c.hs, c.t, inv)
				bitsEqual(t, "Rotate", yc, yg)
				ic, ig := clone(x), clone(x)
				cRotate(ic, ic, cos, sin, rows, width, ld, c.hs, c.t, inv)
				goRotate(ig, ig, cos, sin, rows, width, ld, c.hs, c.t, inv)
				bitsEqual(t, "Rotate in place", ic, ig)
				for i, v := range ic {
					if i%ld >= width && v != x[i] && !(v != v && x[i] != x[i]) {
						t.Fatalf("hs %d: column %d past the heads changed", c.hs, i%ld)
					}
				}
			}
		}
	}
}

// The loops alone, C against Go, at llama-tiny's size: 1024 rows of a
// packed qkv (4 query and 2 key heads of 32 turned, 2 value heads left),
// forward and backward in place.
func BenchmarkRotate(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const rows, hs, heads, ld, t = 1024, 32, 6, 256, 128
	x := randRows(r, rows*ld, false, 1)
	cos, sin := randRows(r, t*hs/2, false, 1), randRows(r, t*hs/2, false, 1)
	for _, impl := range []struct {
		name     string
		f        func(y, x, cos, sin []float32, rows, width, ld, hs, t int, inverse bool)
		wantsCgo bool
	}{{"c", cRotate, true}, {"go", goRotate, false}} {
		b.Run(impl.name, func(b *testing.B) {
			if impl.wantsCgo {
				needC(b)
			}
			b.SetBytes(int64(4 * 2 * 2 * rows * heads * hs))
			for b.Loop() {
				impl.f(x, x, cos, sin, rows, heads*hs, ld, hs, t, false)
				impl.f(x, x, cos, sin, rows, heads*hs, ld, hs, t, true)
			}
		})
	}
}
