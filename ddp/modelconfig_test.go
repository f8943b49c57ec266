package ddp

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
)

// A checkpoint records the model's sizes; resuming it with other sizes
// whose tensors have the same shapes (more heads over the same width) is
// refused, naming the size, instead of training on silently.
func TestResumeRefusesOtherModelSizes(t *testing.T) {
	dir := t.TempDir()
	text := []byte(strings.Repeat("abcdefgh", 400))
	train, err := datasets.NewTokenSource([][]byte{text}, 8, 256)
	require.NoError(t, err)
	run := func(heads int, resume string) error {
		b := cpuBackend(t)
		defer b.done()
		m, err := models.New("gpt", models.Config{Layers: 1, Heads: heads, Width: 16, Context: 8})
		require.NoError(t, err)
		tr, err := New(b.c, b.e, m, adamw(t, 0), Options{GlobalBatch: 4, MaxSteps: 3, LR: 1e-3,
			Checkpoint: CheckpointOptions{Dir: dir, Resume: resume}})
		require.NoError(t, err)
		defer tr.Close()
		_, err = tr.Fit(context.Background(), train, nil)
		return err
	}
	require.NoError(t, run(2, ""))
	err = run(4, "latest")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "checkpoint does not match this run: the checkpoint's model has heads 2, this run's 4 (pass --heads 2 to resume)")
}

// A checkpoint's metadata holds Options.Recipe as it was given, beside the
// optimizer's hyperparameters.
func TestCheckpointRecordsRecipe(t *testing.T) {
	dir := t.TempDir()
	text := []byte(strings.Repeat("abcdefgh", 400))
	train, err := datasets.NewTokenSource([][]byte{text}, 8, 256)
	require.NoError(t, err)
	b := cpuBackend(t)
	defer b.done()
	m, err := models.New("gpt", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 8})
	require.NoError(t, err)
	rec := map[string]any{"optimizer": "adamw", "beta2": 0.95, "warmup_steps": 2}
	tr, err := New(b.c, b.e, m, adamw(t, 0), Options{GlobalBatch: 4, MaxSteps: 3, LR: 1e-3, Recipe: rec,
		Checkpoint: CheckpointOptions{Dir: dir}})
	require.NoError(t, err)
	defer tr.Close()
	_, err = tr.Fit(context.Background(), train, nil)
	require.NoError(t, err)
	latest, _, err := LatestCheckpoint(dir)
	require.NoError(t, err)
	_, meta, err := readCheckpointFile(latest)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"optimizer": "adamw", "beta2": 0.95, "warmup_steps": float64(2)}, meta.Recipe)
	assert.Equal(t, "adamw", meta.Optimizer.Kind)
}
