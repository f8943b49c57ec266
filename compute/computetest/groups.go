package computetest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunGroups runs the conformance suite of every operation group of
// compute/ops.go (Norms, GELUs, Indexing, BatchedMatMul, Attention) and
// compute/ops_llama.go (RMSNorms, SwiGLUs, Rotary, GroupedAttention), and
// compute.Joiner, on e as
// subtests; a group that e lacks is skipped with Require's message. Run
// does not include them, so an engine without the groups runs Run alone:
//
//	func TestGroups(t *testing.T) { computetest.RunGroups(t, myEngine) }
func RunGroups(t *testing.T, e compute.Engine) {
	t.Run("Norms", func(t *testing.T) { RunNorms(t, e) })
	t.Run("GELUs", func(t *testing.T) { RunGELU(t, e) })
	t.Run("Indexing", func(t *testing.T) { RunIndexing(t, e) })
	t.Run("BatchedMatMul", func(t *testing.T) { RunBatchedMatMul(t, e) })
	t.Run("Attention", func(t *testing.T) { RunAttention(t, e) })
	t.Run("RMSNorms", func(t *testing.T) { RunRMSNorm(t, e) })
	t.Run("SwiGLUs", func(t *testing.T) { RunSwiGLU(t, e) })
	t.Run("Rotary", func(t *testing.T) { RunRotary(t, e) })
	t.Run("GroupedAttention", func(t *testing.T) { RunGroupedAttention(t, e) })
	t.Run("Joiner", func(t *testing.T) { RunJoiner(t, e) })
}

// require returns e as the group G, or skips t saying what e lacks.
func require[G any](t *testing.T, e compute.Engine, op string) G {
	t.Helper()
	g, err := compute.Require[G](e, op)
	if err != nil {
		t.Skip(err.Error())
	}
	return g
}

// nanVals is n NaNs: what a tensor that an operation must overwrite holds
// before it runs, so that a result that reads it shows.
func nanVals(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}

// checkNear fails t at the first element of got that is not within tol of
// want (near's measure).
func checkNear(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !near(got[i], want[i], tol) {
			t.Fatalf("%s: element %d of %d is %v, want %v", what, i, len(got), got[i], want[i])
		}
	}
}

// noAllocs fails t for every op that allocates.
func noAllocs(t *testing.T, ops map[string]func()) {
	t.Helper()
	for name, op := range ops {
		if n := testing.AllocsPerRun(5, op); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

// checkReferenceFD checks want, a float64 reference's gradient of loss
// with respect to v, against central differences of loss (which reads v)
// with a step that float32 holds well; they may differ by tol.
func checkReferenceFD(t *testing.T, what string, v []float32, want []float64, loss func() float64, tol float64) {
	t.Helper()
	const h = 1e-3
	for i := range v {
		old := v[i]
		v[i] = old + h
		up := loss()
		v[i] = old - h
		down := loss()
		v[i] = old
		if g := (up - down) / (float64(old+h) - float64(old-h)); math.Abs(g-want[i]) > tol {
			t.Errorf("reference %s[%d] = %v, finite differences %v", what, i, want[i], g)
		}
	}
}

// dot64 is Σ a·b in float64, the objective whose gradient the reference
// checks take: a layer's output against a fixed upstream gradient.
func dot64(a []float64, b []float32) float64 {
	var s float64
	for i, v := range a {
		s += v * float64(b[i])
	}
	return s
}
