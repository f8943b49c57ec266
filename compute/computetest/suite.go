// Package computetest is the conformance suite of compute.Engine: every
// engine (cpu with each BLAS, cuda) runs the same tests, through the Engine
// interface only, against float64 references.
//
// An engine's own test calls Run:
//
//	func TestConformance(t *testing.T) { computetest.Run(t, myEngine) }
package computetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/symddp/symddp/compute"
)

// Run runs every conformance test on e as subtests.
func Run(t *testing.T, e compute.Engine) {
	t.Run("Gemm", func(t *testing.T) { testGemm(t, e) })
	t.Run("GemmRank3", func(t *testing.T) { testGemmRank3(t, e) })
	t.Run("GemmPanics", func(t *testing.T) { testGemmPanics(t, e) })
	t.Run("BiasAct", func(t *testing.T) { testBiasAct(t, e) })
	t.Run("BiasActBackward", func(t *testing.T) { testBiasActBackward(t, e) })
	t.Run("SoftmaxCrossEntropy", func(t *testing.T) { testSoftmax(t, e) })
	t.Run("SoftmaxStable", func(t *testing.T) { testSoftmaxStable(t, e) })
	t.Run("SoftmaxBadLabel", func(t *testing.T) { testSoftmaxBadLabel(t, e) })
	t.Run("Vector", func(t *testing.T) { testVector(t, e) })
	t.Run("SizePanics", func(t *testing.T) { testSizePanics(t, e) })
	t.Run("NoAllocs", func(t *testing.T) { testNoAllocs(t, e) })
}

// rng is a deterministic source for the suite's data.
func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

func randVals(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.Float64()*2 - 1)
	}
	return s
}

// tensorOf allocates a tensor of the shape holding vals.
func tensorOf(e compute.Engine, vals []float32, shape ...int) compute.Tensor {
	t := e.Alloc(shape...)
	e.SetTensor(t, vals)
	return t
}

// read returns t's values on the host.
func read(e compute.Engine, t compute.Tensor) []float32 {
	out := make([]float32, t.Size())
	e.ReadTensor(out, t)
	return out
}

// near reports whether got is within tol (relative, floored at 1) of want.
func near(got float32, want, tol float64) bool {
	return math.Abs(float64(got)-want) <= tol*math.Max(1, math.Abs(want))
}

// expectPanic checks that f panics with a message containing every one of
// the substrings.
func expectPanic(t *testing.T, what string, f func(), substrings ...string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("%s did not panic", what)
			return
		}
		msg := fmt.Sprint(r)
		for _, s := range substrings {
			if !strings.Contains(msg, s) {
				t.Errorf("%s panicked with %q, want it to mention %q", what, msg, s)
			}
		}
	}()
	f()
}
