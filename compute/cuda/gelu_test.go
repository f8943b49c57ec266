package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
)

// The kernels do the CPU engine's float32 operations, so GELU and its
// backward give the CPU engine's bits, NaN and the tails included; also
// when replayed from a graph.
func TestGELUMatchesCPUGPU(t *testing.T) { testGELUMatchesCPU(t, gpuEngine(t)) }
func TestGELUMatchesCPUEmulated(t *testing.T) {
	testGELUMatchesCPU(t, cudatest.NewEmulated(cuda.Options{}))
}

func testGELUMatchesCPU(t *testing.T, e *cuda.Engine) {
	const n = 4099 // not a multiple of a block or a vector
	r := rand.New(rand.NewPCG(22, 7))
	xv, dyv := make([]float32, n), make([]float32, n)
	for i := range xv {
		xv[i], dyv[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64())
	}
	edge := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 9, -9, 44, -44, 88.5, -88.5, 1e6, -1e6,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	copy(xv, edge)
	sameBitsAsCPU(t, e, "GELU", func(en compute.Engine) (func(), []compute.Tensor) {
		g := en.(compute.GELUs)
		x, dy, y, dx := en.Alloc(n), en.Alloc(n), en.Alloc(n), en.Alloc(n)
		en.SetTensor(x, xv)
		en.SetTensor(dy, dyv)
		return func() {
			g.GELU(y, x)
			g.GELUBackward(dx, dy, x)
		}, []compute.Tensor{y, dx}
	})
}

// sameBits: equal bits, or both NaN (a NaN's payload may differ).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}
