package tfmloops

import (
	"math/rand/v2"
	"testing"
)

// The loops alone, C against Go, at gpt-tiny sizes: GELU over (1024,512),
// layer norm over 1024 rows of 128, the causal softmax of one head
// (128 queries of 128 keys).
func BenchmarkGELU(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x := randSlice(r, 1024*512, false, 1)
	y := make([]float32, len(x))
	b.Run("c", func(b *testing.B) {
		needC2(b)
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

func BenchmarkLayerNorm(b *testing.B) {
	const rows, c = 1024, 128
	r := rand.New(rand.NewPCG(3, 4))
	x, w, bb := randSlice(r, rows*c, false, 1), randSlice(r, c, false, 1), randSlice(r, c, false, 1)
	y, m, rs := make([]float32, rows*c), make([]float32, rows), make([]float32, rows)
	b.Run("c", func(b *testing.B) {
		needC2(b)
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

func BenchmarkSoftmaxCausal(b *testing.B) {
	const t = 128
	r := rand.New(rand.NewPCG(5, 6))
	src := randSlice(r, t*t, false, 2)
	p := make([]float32, t*t)
	for _, v := range []struct {
		name string
		f    func([]float32, int, int, int, int)
	}{{"c", cSoftmaxCausal}, {"go", goSoftmaxCausal}} {
		b.Run(v.name, func(b *testing.B) {
			if v.name == "c" {
				needC2(b)
			}
			b.SetBytes(int64(4 * t * (t + 1)))
			for b.Loop() {
				copy(p, src)
				v.f(p, t, 0, t, t)
			}
		})
	}
}

func needC2(b *testing.B) {
	if !cAvailable {
		b.Skip("built without cgo")
	}
}
