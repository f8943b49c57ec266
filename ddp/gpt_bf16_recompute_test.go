package ddp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// bf16GPTRecomputeRun is bf16GPTRunWith for the model built with recompute
// mode r.
func bf16GPTRecomputeRun(t *testing.T, b backend, steps, accumulate int, r models.Recompute) ([]float64, Result, *models.GPT) {
	t.Helper()
	defer b.done()
	train, val, m, o := gptSetup(t, bf16Text(), models.Config{Layers: 2, Heads: 2, Width: 64, Context: 64, Recompute: r})
	opts := Options{GlobalBatch: 8, Accumulate: accumulate, Epochs: 10, MaxSteps: steps, Seed: 5, LR: 3e-3, LogEvery: 1, ClipNorm: 1, EvalLimit: 64}
	var losses []float64
	opts.Hooks.OnLog = func(l LogInfo) { losses = append(losses, l.Loss) }
	tr, err := New(b.c, b.e, m, o, opts)
	require.NoError(t, err)
	defer tr.Close()
	res, err := tr.Fit(context.Background(), train, val)
	require.NoError(t, err)
	return losses, res, m.(*models.GPT)
}

// The bf16 GPT with --recompute block trains the pinned bits of the run
// without it (TestBF16GPTBitsEmulated's): the same losses and parameter
// hash, with the step's CUDA graph and without, and accumulating two
// micro-batches (the recompute of the first micro-batch's blocks must not
// disturb the second's).
func TestBF16GPTRecomputeBlockBitsEmulated(t *testing.T) {
	for _, graphs := range []bool{true, false} {
		losses, res, m := bf16GPTRecomputeRun(t, emulatedBackend(graphs), 6, 1, models.RecomputeBlock)
		require.Equal(t, compute.PrecisionBF16, m.Precision())
		require.Equal(t, models.RecomputeBlock, m.Recompute())
		require.Equal(t, bf16Losses, losses, "graphs %v", graphs)
		require.Equal(t, bf16Hash, res.Replicas.Hashes[0], "graphs %v: parameter hash %016x, want %016x", graphs, res.Replicas.Hashes[0], bf16Hash)
	}
	losses, res, _ := bf16GPTRecomputeRun(t, emulatedBackend(true), 4, 2, models.RecomputeBlock)
	require.Equal(t, bf16HalfLosses, losses, "accumulating 2 micro-batches")
	require.Equal(t, bf16HalfHash, res.Replicas.Hashes[0], "accumulating 2 micro-batches: parameter hash %016x", res.Replicas.Hashes[0])
}

// TestBF16GPTRecomputeBlockBitsGPU is the same comparison on the real GPU
// (nvshmem comm of one PE), where no bits are pinned: 20 steps with
// --recompute none and block, graphs and eager, give the same losses and
// parameter hash, and the block run's engine holds less device memory.
func TestBF16GPTRecomputeBlockBitsGPU(t *testing.T) {
	// the runs are compared bit for bit: keep cuBLASLt's heuristic
	// choices, as timed picks may differ between them
	t.Setenv("SYMDDP_CUDA_TUNE", "0")
	gpu := gpuBackends(t, 256<<20)
	const steps = 20
	nl, nres, _ := bf16GPTRecomputeRun(t, gpu(true), steps, 1, models.RecomputeNone)
	for _, graphs := range []bool{true, false} {
		bl, bres, m := bf16GPTRecomputeRun(t, gpu(graphs), steps, 1, models.RecomputeBlock)
		require.Equal(t, compute.PrecisionBF16, m.Precision())
		require.Equal(t, nl, bl, "graphs %v: losses", graphs)
		require.Equal(t, nres.Replicas.Hashes[0], bres.Replicas.Hashes[0], "graphs %v: parameter hash %016x, want %016x", graphs, bres.Replicas.Hashes[0], nres.Replicas.Hashes[0])
		require.Len(t, bres.DeviceBytes, 1)
		require.Len(t, nres.DeviceBytes, 1)
		require.LessOrEqual(t, bres.DeviceBytes[0], nres.DeviceBytes[0], "graphs %v: the engine's device memory", graphs)
		t.Logf("graphs %v: device memory of the engine %d bytes with --recompute block, %d without", graphs, bres.DeviceBytes[0], nres.DeviceBytes[0])
	}
}
