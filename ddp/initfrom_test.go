package ddp_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch/launchtest"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
)

// TestInitFrom: a 2-PE job started from a Hugging Face export begins with
// exactly its weights on both PEs at step 0 and trains from them; from a
// directory whose config.json does not fit the model, New fails on both
// PEs with the same one-line *InitError naming PE 0 and the field.
func TestInitFrom(t *testing.T) {
	dir := filepath.Join(os.TempDir(), "symddp-initfrom")
	cfg := models.Config{Layers: 2, Heads: 2, Width: 32, Context: 16}
	hf, bad := filepath.Join(dir, "hf"), filepath.Join(dir, "bad")
	var arena []float32
	if !launchtest.InPE() {
		os.RemoveAll(dir)
		t.Cleanup(func() { os.RemoveAll(dir) })
		m, err := models.New("gpt", cfg)
		require.NoError(t, err)
		_, n := models.Layout(m.Params())
		rng := rand.New(rand.NewPCG(11, 0))
		arena = make([]float32, n)
		for i := range arena {
			arena[i] = float32(rng.NormFloat64() * 0.1)
		}
		ckpt := filepath.Join(dir, "ckpt", "ckpt-000000001.safetensors")
		require.NoError(t, os.MkdirAll(filepath.Dir(ckpt), 0o755))
		require.NoError(t, ddp.WriteTestCheckpoint(ckpt, m, arena))
		w, err := ddp.ReadWeights(ckpt)
		require.NoError(t, err)
		for _, d := range []string{hf, bad} {
			_, err = ddp.ExportHFGPT2(w, d, ddp.HFExportOptions{})
			require.NoError(t, err)
		}
		js, err := os.ReadFile(filepath.Join(bad, "config.json"))
		require.NoError(t, err)
		js = []byte(strings.Replace(string(js), `"n_head": 2`, `"n_head": 4`, 1))
		require.NoError(t, os.WriteFile(filepath.Join(bad, "config.json"), js, 0o644))
	}
	wantErr := "initial weights (read on PE 0): " + bad + ": config.json has n_head 4, the model 2 (--heads 4)"
	body := func(from string) func(t *testing.T, c comm.Comm) record {
		return func(t *testing.T, c comm.Comm) record {
			e, err := cpu.New(cpu.Options{Threads: 1})
			require.NoError(t, err)
			train, val, m, o := ddp.GPTSetup(t, smallText(), cfg)
			opts := gptOpts()
			opts.InitFrom, opts.MaxSteps, opts.LogEvery, opts.EvalLimit = from, 5, 1, 64
			tr, err := ddp.New(c, e, m, o, opts)
			if from == bad {
				var ie *ddp.InitError
				require.ErrorAs(t, err, &ie, "PE %d", c.MyPE())
				require.EqualError(t, err, wantErr, "PE %d", c.MyPE())
				require.True(t, ddp.Shared(err))
				var origin interface{ OriginPE() int }
				require.ErrorAs(t, err, &origin)
				require.Equal(t, 0, origin.OriginPE(), "the launcher names PE 0 as the one that failed")
				return record{Err: err.Error()}
			}
			require.NoError(t, err)
			rep, err := tr.CheckReplicas()
			require.NoError(t, err)
			rec := record{Hash: rep.Hashes[0], Identity: rep.Identical, Steps: tr.Step()}
			opts.Hooks.OnLog = nil
			res, err := tr.Fit(context.Background(), train, val)
			require.NoError(t, err)
			rec.TestAcc = float64(res.Steps)
			rec.Losses = []float64{res.Test.Loss}
			require.NoError(t, tr.Close())
			return rec
		}
	}
	good := runJob(t, "hf", 2, body(hf))
	failed := runJob(t, "bad", 2, body(bad))
	if launchtest.InPE() {
		return
	}
	require.True(t, good.Identity, "both PEs start from the same bits")
	require.Equalf(t, ddp.HashFloat32s(arena), good.Hash, "parameters after New: %016x, the export's %016x", good.Hash, ddp.HashFloat32s(arena))
	require.Equal(t, 0, good.Steps, "the step count starts fresh")
	require.Equal(t, 5.0, good.TestAcc, "steps trained after the import")
	require.False(t, math.IsNaN(good.Losses[0]))
	require.Equal(t, wantErr, failed.Err)
}
