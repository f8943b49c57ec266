package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/internal/cudalib"
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

// In fp32 the flash kernel takes head sizes up to 64: its plans say so
// and take each row's log-sum-exp (B,H,T) and the backward's scratch (D
// and the causal 64×64 tiles of dS: 3 of 4 at T 128), where the GEMM plans
// of larger head sizes take the (B,H,T,T) probabilities and their
// gradient.
func TestFP32AttentionPlansEmulated(t *testing.T) {
	const B, T, H = 2, 128, 2
	for _, c := range []struct {
		hs    int
		flash bool
	}{{1, true}, {64, true}, {65, false}} {
		hs := c.hs
		for name, build := range map[string]func(e *cuda.Engine) (any, error){
			"multi-head": func(e *cuda.Engine) (any, error) {
				return e.CausalAttention(compute.AttentionSpec{B: B, T: T, C: H * hs, Heads: H})
			},
			"grouped": func(e *cuda.Engine) (any, error) {
				return e.GroupedCausalAttention(compute.GroupedAttentionSpec{B: B, T: T, Heads: H, KVHeads: 1, HeadSize: hs})
			},
		} {
			e := cudatest.NewEmulated(cuda.Options{})
			before := e.TakenBytes()
			p, err := build(e)
			if err != nil {
				t.Fatalf("%s, head size %d: %v", name, hs, err)
			}
			taken := e.TakenBytes() - before
			flashBytes := int64(4*B*H*T + 4*cudalib.AttentionF32ScratchFloats(B, H, T))
			path, flash := p.(interface{ Path() string })
			switch {
			case c.flash && (!flash || path.Path() != "flash attention (fp32)"):
				t.Errorf("%s, head size %d: plan %T, want the flash kernel's", name, hs, p)
			case c.flash && taken > flashBytes:
				t.Errorf("%s, head size %d: the plan took %d bytes, want no more than lse's and the scratch's %d", name, hs, taken, flashBytes)
			case !c.flash && (flash || taken < 2*4*B*H*T*T):
				t.Errorf("%s, head size %d: plan %T took %d bytes, want the GEMM plan's probabilities and gradient", name, hs, p, taken)
			}
		}
	}
}
