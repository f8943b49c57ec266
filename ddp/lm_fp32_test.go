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

// An fp32 language model on the CUDA engine against the CPU engine: the
// GPT's and the Llama's structure at sizes the emulator runs in a second
// or two, trained in fp32 on the engine's operation groups (not its bf16
// plans, even on the CUDA engine) through the device step path.

// fp32LM is one of the models these tests train: its registered name and
// its sizes (Precision fp32).
type fp32LM struct {
	name string
	cfg  models.Config
}

var (
	// gpt-tiny's structure: 2 layers, width 64 in 2 heads of 32, context 64.
	fp32GPT = fp32LM{"gpt-tiny", models.Config{Layers: 2, Heads: 2, Width: 64, Context: 64, Precision: compute.PrecisionF32}}
	// llama-tiny's: 2 layers, width 64 in 4 query heads of 16 sharing 2
	// key/value heads, context 64 (RMSNorms, SwiGLUs, Rotary,
	// GroupedAttention).
	fp32Llama = fp32LM{"llama-tiny", models.Config{Layers: 2, Heads: 4, KVHeads: 2, Width: 64, Context: 64, Precision: compute.PrecisionF32}}
)

// run trains the model on b for steps steps and returns the loss of every
// step and the parameters after the last.
func (lm fp32LM) run(t *testing.T, b backend, steps int) ([]float64, []float32) {
	t.Helper()
	defer b.done()
	train, _, m, o := lmSetup(t, lm.name, bf16Text(), lm.cfg)
	if l, ok := m.(*models.Llama); ok {
		require.Less(t, l.Config().KVHeads, l.Config().Heads, "grouped key/value heads")
	}
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
	if p, ok := m.(interface{ Precision() compute.Precision }); ok {
		require.Equal(t, compute.PrecisionF32, p.Precision(), "the model computes in fp32")
	}
	return losses, tr.Params()
}

// matchesCPU trains the model for 20 steps on the CPU engine and on the
// emulated CUDA engine and compares the runs (compareFP32).
func (lm fp32LM) matchesCPU(t *testing.T) {
	const steps = 20
	cl, cp := lm.run(t, cpuBackend(t), steps)
	gl, gp := lm.run(t, emulatedBackend(true), steps)
	require.Len(t, gl, steps)
	compareFP32(t, cl, gl, cp, gp, 1e-4, 1e-3)
}

// matchesCPUGPU is matchesCPU on the real GPU (nvshmem comm of one PE),
// with CUDA graphs and without (the same bits). It needs a process of its
// own (gpuBackends).
func (lm fp32LM) matchesCPUGPU(t *testing.T) {
	// Graph and eager runs use separate engines and are compared bit for
	// bit: keep cuBLASLt's heuristic choice instead of tuned algorithms.
	t.Setenv("SYMDDP_CUDA_TUNE", "0")
	gpu := gpuBackends(t, 256<<20)
	const steps = 20
	cl, cp := lm.run(t, cpuBackend(t), steps)
	gl, gp := lm.run(t, gpu(true), steps)
	el, ep := lm.run(t, gpu(false), steps)
	require.Len(t, gl, steps)
	compareFP32(t, cl, gl, cp, gp, 1e-4, 1e-3)
	require.Equal(t, gl, el, "graphs and eager steps give the same losses")
	require.Equal(t, gp, ep, "graphs and eager steps give the same parameters")
}

// compareFP32 checks an fp32 run on the CUDA engine against the CPU
// engine's, step by step: the two differ only in how their GEMMs round
// (cuBLAS, or the emulator's float64 sums, against the CPU BLAS) and in
// attention, a flash kernel whose sums over tiles (the emulator's in
// float64) agree with the CPU engine's to fp32 rounding; the other kernels
// give the CPU engine's bits. So the losses agree to float32 rounding,
// lossTol relative at every step, and no parameter is more than paramTol
// from the CPU's after the last step.
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
// GELUs, Indexing and Attention and trains like the CPU engine.
func TestGPTFP32MatchesCPU(t *testing.T) { fp32GPT.matchesCPU(t) }

// TestGPTFP32MatchesCPUGPU is TestGPTFP32MatchesCPU on the real GPU.
func TestGPTFP32MatchesCPUGPU(t *testing.T) { fp32GPT.matchesCPUGPU(t) }

// TestLlamaFP32MatchesCPU: a Llama on the (emulated) CUDA engine takes the
// device step path through the engine's RMSNorms, SwiGLUs, Rotary and
// GroupedAttention and trains like the CPU engine.
func TestLlamaFP32MatchesCPU(t *testing.T) { fp32Llama.matchesCPU(t) }

// TestLlamaFP32MatchesCPUGPU is TestLlamaFP32MatchesCPU on the real GPU.
func TestLlamaFP32MatchesCPUGPU(t *testing.T) { fp32Llama.matchesCPUGPU(t) }
