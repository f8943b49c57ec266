package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/internal/hostloops"
)

// The attention plans' causal softmax and its backward do hostloops'
// float32 operations in its order (the CPU engine's loops): the same bits,
// for sizes below, at and past a multiple of eight, with ties, large and
// infinite scores (a query's own score -inf stays finite elsewhere).
func TestSoftmaxCausalMatchesCPUGPU(t *testing.T) { testSoftmaxCausalMatchesCPU(t, gpuEngine(t)) }
func TestSoftmaxCausalMatchesCPUEmulated(t *testing.T) {
	testSoftmaxCausalMatchesCPU(t, cudatest.NewEmulated(cuda.Options{}))
}

func testSoftmaxCausalMatchesCPU(t *testing.T, e *cuda.Engine) {
	for _, sh := range [][2]int{{1, 1}, {2, 7}, {3, 8}, {2, 9}, {1, 13}, {4, 64}, {1, 130}} {
		nmat, T := sh[0], sh[1]
		n := nmat * T * T
		r := rand.New(rand.NewPCG(uint64(nmat), uint64(T)))
		s, g := make([]float32, n), make([]float32, n)
		for i := range s {
			s[i], g[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64())
			switch r.IntN(40) {
			case 0:
				s[i] = 3 // ties
			case 1:
				s[i] = 90 // past exp32's clamp
			case 2:
				s[i] = float32(math.Inf(-1))
			}
		}
		for i := 0; i < nmat*T; i++ {
			s[i*T] = float32(r.NormFloat64()) // every row's first score finite
		}
		wantP, wantG := append([]float32(nil), s...), append([]float32(nil), g...)
		for m := 0; m < nmat; m++ {
			hostloops.SoftmaxCausal(wantP[m*T*T:(m+1)*T*T], T, 0, T, T)
			hostloops.SoftmaxCausalBackward(wantG[m*T*T:(m+1)*T*T], wantP[m*T*T:(m+1)*T*T], T, 0, T, T)
		}
		p, ds := e.Alloc(n).(*cuda.Tensor), e.Alloc(n).(*cuda.Tensor)
		e.SetTensor(p, s)
		e.SetTensor(ds, g)
		if err := cuda.SoftmaxCausal(e, p, nmat, T); err != nil {
			t.Fatal(err)
		}
		if err := cuda.SoftmaxCausalBackward(e, ds, p, nmat, T); err != nil {
			t.Fatal(err)
		}
		gotP, gotG := make([]float32, n), make([]float32, n)
		e.ReadTensor(gotP, p)
		e.ReadTensor(gotG, ds)
		what := fmt.Sprintf("%d matrices of %d", nmat, T)
		for i := range gotP {
			if !sameBits(gotP[i], wantP[i]) || !sameBits(gotG[i], wantG[i]) {
				t.Fatalf("%s: row %d, key %d: p %v, ds %v; hostloops %v, %v", what, i/T, i%T, gotP[i], gotG[i], wantP[i], wantG[i])
			}
		}
	}
}
