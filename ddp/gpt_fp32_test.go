package ddp

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/models"
)

// fp32GPTRun trains gpt-tiny's structure at a size the emulator runs in a
// second (2 layers, width 64 in 2 heads of 32, context 64) in fp32 on b:
// the engine's fp32 operation groups, not its bf16 plans, even on the
// CUDA engine. It returns the loss of every step, the parameters after the
// last step and the model.
func fp32GPTRun(t *testing.T, b backend, steps int) ([]float64, []float32, *models.GPT) {
	t.Helper()
	defer b.done()
	train, _, m, o := gptSetup(t, bf16Text(), models.Config{Layers: 2, Heads: 2, Width: 64, Context: 64, Precision: compute.PrecisionF32})
	opts := Options{GlobalBatch: 4, Epochs: 10, MaxSteps: steps, Seed: 5, LR: 3e-3, LogEvery: 1, ClipNorm: 1}
	var losses []float64
	opts.Hooks.OnLog = func(l LogInfo) { losses = append(losses, l.Loss) }
	tr, err := New(b.c, b.e, m, o, opts)
	require.NoError(t, err)
	defer tr.Close()
	if _, gpu := b.e.(*cuda.Engine); gpu {
		require.Equal(t, "device", tr.Strategy(), "the CUDA engine takes the device step path")
	}
	_, err = tr.Fit(context.Background(), train, nil)
	require.NoError(t, err)
	g := m.(*models.GPT)
	require.Equal(t, compute.PrecisionF32, g.Precision(), "the GPT computes in fp32")
	return losses, tr.Params(), g
}

// compareFP32 checks an fp32 GPT run on the CUDA engine against the CPU
// engine's, step by step: the two differ only in how their GEMMs round
// (cuBLAS, or the emulator's float64 sums, against the CPU BLAS; the
// other kernels give the CPU engine's bits), so the losses agree to
// float32 rounding, lossTol relative at every step, and no parameter is
// more than paramTol from the CPU's after the last step.
func compareFP32(t *testing.T, cpu, gpu []float64, cp, gp []float32, lossTol, paramTol float64) {
	t.Helper()
	require.Equal(t, len(cpu), len(gpu))
	for i := range cpu {
		d := math.Abs(cpu[i] - gpu[i])
		t.Logf("step %2d: loss cpu %.7f  cuda fp32 %.7f  difference %.2g", i+1, cpu[i], gpu[i], d)
		if d > lossTol*math.Max(1, math.Abs(cpu[i])) {
			t.Errorf("step %d: loss %v on the CPU, %v on the CUDA engine in fp32: differ by more than %g", i+1, cpu[i], gpu[i], lossTol)
		}
	}
	require.Equal(t, len(cp), len(gp))
	worst, at := 0.0, 0
	for i := range cp {
		if d := math.Abs(float64(cp[i] - gp[i])); d > worst || d != d {
			worst, at = d, i
		}
	}
	t.Logf("largest parameter difference after %d steps: %.3g (parameter %d: cpu %v, cuda %v)", len(cpu), worst, at, cp[at], gp[at])
	require.LessOrEqual(t, worst, paramTol, "largest parameter difference")
	n := len(gpu) - 1
	require.Less(t, gpu[n], gpu[0], "the fp32 run learns")
}

// TestGPTFP32MatchesCPU: models.GPT with Precision fp32 on the (emulated)
// CUDA engine takes the device step path through the engine's Norms,
// GELUs, Indexing and Attention and trains like the CPU engine for 20
// steps.
func TestGPTFP32MatchesCPU(t *testing.T) {
	const steps = 20
	cl, cp, _ := fp32GPTRun(t, cpuBackend(t), steps)
	gl, gp, _ := fp32GPTRun(t, emulatedBackend(true), steps)
	require.Len(t, gl, steps)
	compareFP32(t, cl, gl, cp, gp, 1e-4, 1e-3)
}

// TestGPTFP32MatchesCPUGPU is TestGPTFP32MatchesCPU on the real GPU
// (nvshmem comm of one PE), with CUDA graphs and without (the same bits).
// It needs a process of its own (gpuBackends).
func TestGPTFP32MatchesCPUGPU(t *testing.T) {
	// Graph and eager runs use separate engines and are compared bit for
	// bit: keep cuBLASLt's heuristic choice instead of tuned algorithms.
	t.Setenv("SYMDDP_CUDA_TUNE", "0")
	gpu := gpuBackends(t, 256<<20)
	const steps = 20
	cl, cp, _ := fp32GPTRun(t, cpuBackend(t), steps)
	gl, gp, _ := fp32GPTRun(t, gpu(true), steps)
	el, ep, _ := fp32GPTRun(t, gpu(false), steps)
	require.Len(t, gl, steps)
	compareFP32(t, cl, gl, cp, gp, 1e-4, 1e-3)
	require.Equal(t, gl, el, "graphs and eager steps give the same losses")
	require.Equal(t, gp, ep, "graphs and eager steps give the same parameters")
}
