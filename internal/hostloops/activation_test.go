package hostloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestActivationsMatchGo(t *testing.T) {
	forCases(t, func(t *testing.T, r *rand.Rand, n, off int, sp bool) {
		y := randElems(r, n, sp)
		dc, dg := two(r, n, off, sp)
		cReLUMask(dc, y)
		goReLUMask(dg, y)
		bitsEqual(t, "ReLUMask", dc, dg)

		for _, cols := range []int{1, 3, 10, 64, 256} {
			rows := max(1, n/cols)
			bias := randElems(r, cols, sp)
			for _, b := range [][]float32{bias, nil} {
				for _, relu := range []bool{true, false} {
					yc, yg := two(r, rows*cols, off, sp)
					cBiasAct(yc, b, rows, cols, relu)
					goBiasAct(yg, b, rows, cols, relu)
					bitsEqual(t, "BiasAct", yc, yg)
				}
			}
			sc, sg := two(r, cols, off, sp)
			d := randElems(r, rows*cols, sp)
			cColSums(sc, d, rows, cols)
			goColSums(sg, d, rows, cols)
			bitsEqual(t, "ColSums", sc, sg)
		}
	})
}

// The ReLU mask zeroes d exactly where y <= 0, for every class of float32
// (±0, ±subnormal, ±Inf, ±NaN), as the plain comparison does; in both loops.
func TestReLUMaskEdgeCases(t *testing.T) {
	nan := float32(math.NaN())
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-45, -1e-45, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), nan, -nan, math.Float32frombits(0x7fffffff), math.Float32frombits(0xff800001)}
	impls := map[string]func(d, y []float32){"go": goReLUMask}
	if cAvailable {
		impls["c"] = cReLUMask
	}
	for name, mask := range impls {
		for _, y := range vals {
			for _, d := range vals {
				const n = minC + 3 // long enough for the C loop's vector body
				got, ys := make([]float32, n), make([]float32, n)
				for i := range got {
					got[i], ys[i] = d, y
				}
				mask(got, ys)
				want := d
				if y <= 0 {
					want = 0
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want) {
						t.Fatalf("%s: y %v (bits %#x), d %v: got %v, want %v", name, y, math.Float32bits(y), d, got[i], want)
					}
				}
			}
		}
	}
}

func BenchmarkReLUMask(b *testing.B) { benchLoop(b, 128*256, cReLUMask, goReLUMask) }

func BenchmarkBiasReLU(b *testing.B) {
	bias := make([]float32, 256)
	benchLoop(b, 128*256,
		func(y, _ []float32) { cBiasAct(y, bias, 128, 256, true) },
		func(y, _ []float32) { goBiasAct(y, bias, 128, 256, true) })
}
