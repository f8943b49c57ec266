package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/computetest"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
)

// The GELUs group (the GPT's activation): its conformance suite.
func TestGELUGPU(t *testing.T) { computetest.RunGELU(t, gpuEngine(t)) }
func TestGELUEmulated(t *testing.T) {
	computetest.RunGELU(t, cudatest.NewEmulated(cuda.Options{}))
}

// The kernels do the CPU engine's float32 operations, so GELU and its
// backward give the CPU engine's bits, NaN and the tails included; also
// when replayed from a graph.
func TestGELUMatchesCPUGPU(t *testing.T) { testGELUMatchesCPU(t, gpuEngine(t)) }
func TestGELUMatchesCPUEmulated(t *testing.T) {
	testGELUMatchesCPU(t, cudatest.NewEmulated(cuda.Options{}))
}

func testGELUMatchesCPU(t *testing.T, e *cuda.Engine) {
	ce, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4099 // not a multiple of a block or a vector
	r := rand.New(rand.NewPCG(22, 7))
	xv, dyv := make([]float32, n), make([]float32, n)
	for i := range xv {
		xv[i], dyv[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64())
	}
	edge := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 9, -9, 44, -44, 88.5, -88.5, 1e6, -1e6,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	copy(xv, edge)
	run := func(en compute.Engine, graph bool) (y, dx []float32) {
		g, _ := en.(compute.GELUs)
		x, dy := en.Alloc(n), en.Alloc(n)
		yt, dxt := en.Alloc(n), en.Alloc(n)
		en.SetTensor(x, xv)
		en.SetTensor(dy, dyv)
		if graph {
			ge := en.(*cuda.Engine)
			if err := ge.BeginCapture(); err != nil {
				t.Fatal(err)
			}
			g.GELU(yt, x)
			g.GELUBackward(dxt, dy, x)
			gr, err := ge.EndCapture()
			if err != nil {
				t.Fatal(err)
			}
			defer gr.Close()
			if err := gr.Launch(cuda.StepValues{}); err != nil {
				t.Fatal(err)
			}
		} else {
			g.GELU(yt, x)
			g.GELUBackward(dxt, dy, x)
		}
		y, dx = make([]float32, n), make([]float32, n)
		en.ReadTensor(y, yt)
		en.ReadTensor(dx, dxt)
		if err := en.Sync(); err != nil {
			t.Fatal(err)
		}
		return y, dx
	}
	wantY, wantDX := run(ce, false)
	for _, graph := range []bool{false, true} {
		y, dx := run(e, graph)
		for i := range xv {
			if !sameBits(y[i], wantY[i]) || !sameBits(dx[i], wantDX[i]) {
				t.Fatalf("graph %v: x = %v: gelu %v, gelu' %v; the CPU engine: %v, %v", graph, xv[i], y[i], dx[i], wantY[i], wantDX[i])
			}
		}
	}
}

// sameBits: equal bits, or both NaN (a NaN's payload may differ).
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}
