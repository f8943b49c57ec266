package ddp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/models"
)

// fp32LlamaRun trains llama-tiny's structure at a size the emulator runs
// in a second or two (2 layers, width 64 in 4 query heads of 16 sharing 2
// key/value heads, context 64) on b, in fp32 on the engine's operation
// groups (RMSNorms, SwiGLUs, Rotary, GroupedAttention, Indexing). It
// returns the loss of every step and the parameters after the last step.
func fp32LlamaRun(t *testing.T, b backend, steps int) ([]float64, []float32) {
	t.Helper()
	defer b.done()
	train, _, m, o := lmSetup(t, "llama-tiny", bf16Text(),
		models.Config{Layers: 2, Heads: 4, KVHeads: 2, Width: 64, Context: 64, Precision: compute.PrecisionF32})
	l := m.(*models.Llama).Config()
	require.Less(t, l.KVHeads, l.Heads, "grouped key/value heads")
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
	return losses, tr.Params()
}

// TestLlamaFP32MatchesCPU: a Llama on the (emulated) CUDA engine takes the
// device step path through the engine's RMSNorms, SwiGLUs, Rotary and
// GroupedAttention and trains like the CPU engine for 20 steps (the
// engines differ only in their GEMMs' rounding, as compareFP32 says).
func TestLlamaFP32MatchesCPU(t *testing.T) {
	const steps = 20
	cl, cp := fp32LlamaRun(t, cpuBackend(t), steps)
	gl, gp := fp32LlamaRun(t, emulatedBackend(true), steps)
	require.Len(t, gl, steps)
	compareFP32(t, cl, gl, cp, gp, 1e-4, 1e-3)
}

// TestLlamaFP32MatchesCPUGPU is TestLlamaFP32MatchesCPU on the real GPU
// (nvshmem comm of one PE), with CUDA graphs and without (the same bits).
// It needs a process of its own (gpuBackends).
func TestLlamaFP32MatchesCPUGPU(t *testing.T) {
	// Graph and eager runs use separate engines and are compared bit for
	// bit: keep cuBLASLt's heuristic choice instead of tuned algorithms.
	t.Setenv("SYMDDP_CUDA_TUNE", "0")
	gpu := gpuBackends(t, 256<<20)
	const steps = 20
	cl, cp := fp32LlamaRun(t, cpuBackend(t), steps)
	gl, gp := fp32LlamaRun(t, gpu(true), steps)
	el, ep := fp32LlamaRun(t, gpu(false), steps)
	require.Len(t, gl, steps)
	compareFP32(t, cl, gl, cp, gp, 1e-4, 1e-3)
	require.Equal(t, gl, el, "graphs and eager steps give the same losses")
	require.Equal(t, gp, ep, "graphs and eager steps give the same parameters")
}
