package ddp_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch/launchtest"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
)

// smallText is a byte stream with structure a small GPT learns in a few
// dozen steps.
func smallText() []byte { return ddp.CodeText(64<<10, "f", "x", "*") }

// trainGPTIn trains a 2-layer GPT of width 32 on smallText with AdamW
// (weight decay on matrices only) and clipping, and returns its record.
func trainGPTIn(t *testing.T, c comm.Comm, opts ddp.Options) record {
	t.Helper()
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	train, val, m, o := ddp.GPTSetup(t, smallText(), models.Config{Layers: 2, Heads: 2, Width: 32, Context: 16})
	var rec record
	opts.LogEvery, opts.ClipNorm, opts.EvalLimit = 1, 1, 64
	opts.Hooks.OnLog = func(l ddp.LogInfo) { rec.Losses = append(rec.Losses, l.Loss) }
	tr, err := ddp.New(c, e, m, o, opts)
	require.NoError(t, err)
	res, err := tr.Fit(context.Background(), train, val)
	losses := rec.Losses
	rec = recordOf(res, err)
	rec.Losses, rec.TestAcc = losses, res.Test.Loss
	require.NoError(t, tr.Close())
	return rec
}

func gptOpts() ddp.Options {
	return ddp.Options{GlobalBatch: 8, Epochs: 1, MaxSteps: 50, Seed: 5, LR: 3e-3}
}

// TestGPTPEsAgree: a GPT trained on 1 and on 4 PEs with the same seed and
// global batch has the same losses for 50 steps, up to float32 summation
// order, and learns.
func TestGPTPEsAgree(t *testing.T) {
	body := func(t *testing.T, c comm.Comm) record { return trainGPTIn(t, c, gptOpts()) }
	one := runJob(t, "pes1", 1, body)
	four := runJob(t, "pes4", 4, body)
	if launchtest.InPE() {
		return
	}
	for _, r := range []record{one, four} {
		require.Empty(t, r.Err)
		require.True(t, r.Identity, "replicas identical")
		require.Len(t, r.Losses, 50)
	}
	for i := range one.Losses {
		if d := math.Abs(one.Losses[i] - four.Losses[i]); d > 2e-4*math.Max(1, math.Abs(one.Losses[i])) {
			t.Fatalf("step %d: loss %.7f at 1 PE, %.7f at 4 PEs", i+1, one.Losses[i], four.Losses[i])
		}
	}
	if one.Losses[49] > 0.6*one.Losses[0] {
		t.Fatalf("loss did not fall: %.4f -> %.4f", one.Losses[0], one.Losses[49])
	}
	t.Logf("loss %.4f -> %.4f, validation %.4f", one.Losses[0], one.Losses[49], one.TestAcc)
}

// TestGPTResumeIsExact: 40 steps in one run end on the same parameter hash
// as 20 steps, a checkpoint and a resume for 20 more, at 2 PEs (sharded
// AdamW, decay on matrices only).
func TestGPTResumeIsExact(t *testing.T) {
	dir := filepath.Join(os.TempDir(), "symddp-gpt-resume")
	if !launchtest.InPE() {
		os.RemoveAll(dir)
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	job := func(steps int, ck ddp.CheckpointOptions) func(t *testing.T, c comm.Comm) record {
		return func(t *testing.T, c comm.Comm) record {
			o := gptOpts()
			o.MaxSteps, o.Checkpoint = steps, ck
			return trainGPTIn(t, c, o)
		}
	}
	whole := runJob(t, "whole", 2, job(40, ddp.CheckpointOptions{}))
	first := runJob(t, "first", 2, job(20, ddp.CheckpointOptions{Dir: dir}))
	second := runJob(t, "second", 2, job(40, ddp.CheckpointOptions{Dir: dir, Resume: "latest"}))
	if launchtest.InPE() {
		return
	}
	for _, r := range []record{whole, first, second} {
		require.Empty(t, r.Err)
		require.True(t, r.Identity)
	}
	require.Equal(t, 20, first.Steps)
	require.Equal(t, 40, second.Steps)
	require.Equalf(t, whole.Hash, second.Hash, "parameters after 40 steps: %016x in one run, %016x with a resume at 20", whole.Hash, second.Hash)
	w, err := ddp.ReadWeights(dir)
	require.NoError(t, err)
	require.Equal(t, 40, w.Step)
	require.Equal(t, 2, w.Config["heads"], "the checkpoint records the model's sizes")
}
