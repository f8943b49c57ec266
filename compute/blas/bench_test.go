package blas

import (
	"fmt"
	"math/rand/v2"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
)

// BenchmarkSgemm runs the three GEMMs of a Linear layer of the mlp's first
// layer (batch 256, 784 in, 256 out) on one thread: forward x·Wᵀ (NT),
// weight gradient dyᵀ·x (TN) and input gradient dy·W (NN).
func BenchmarkSgemm(b *testing.B) {
	const batch, in, out = 256, 784, 256
	r := rand.New(rand.NewPCG(1, 1))
	x, w, dy := randSlice(r, batch*in), randSlice(r, out*in), randSlice(r, batch*out)
	y, dw, dx := make([]float32, batch*out), make([]float32, out*in), make([]float32, batch*in)
	shapes := []struct {
		name    string
		tA, tB  gblas.Transpose
		m, n, k int
		a, bm   []float32
		lda     int
		ldb     int
		c       []float32
	}{
		{"NT", gblas.NoTrans, gblas.Trans, batch, out, in, x, w, in, in, y},
		{"TN", gblas.Trans, gblas.NoTrans, out, in, batch, dy, x, out, in, dw},
		{"NN", gblas.NoTrans, gblas.NoTrans, batch, in, out, dy, w, out, in, dx},
	}
	for _, kind := range []Kind{OpenBLAS, Gonum} {
		bl, err := Load(kind)
		if err != nil {
			b.Logf("%s: %v", kind, err)
			continue
		}
		bl.SetThreads(1)
		for _, s := range shapes {
			b.Run(fmt.Sprintf("%s/%s/%dx%dx%d", kind, s.name, s.m, s.n, s.k), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					bl.Sgemm(s.tA, s.tB, s.m, s.n, s.k, 1, s.a, s.lda, s.bm, s.ldb, 0, s.c, s.n)
				}
				b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
