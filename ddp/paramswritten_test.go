package ddp

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// watchEngine is an engine that counts devicestep.ParamsWatcher's calls.
type watchEngine struct {
	compute.Engine
	written int
}

func (w *watchEngine) ParamsWritten() { w.written++ }

// ddp tells an engine that keeps copies of the parameters (compute/cuda's
// bf16 weights, which its update writes) when it writes the parameters
// other than through the update: once after their initialisation, once
// more after a resume loaded them.
func TestParamsWrittenAfterInitAndResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	train, test, err := datasets.SyntheticSplit(600, 100, 20, 4, 7)
	require.NoError(t, err)
	for _, c := range []struct {
		resume      string
		steps, want int
	}{{"", 3, 1}, {"latest", 5, 2}} {
		b := cpuBackend(t)
		w := &watchEngine{Engine: b.e}
		m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16}, Classes: 4})
		require.NoError(t, err)
		o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
		require.NoError(t, err)
		opts := Options{GlobalBatch: 32, Epochs: 2, MaxSteps: c.steps, LR: 0.05, Seed: 3,
			Checkpoint: CheckpointOptions{Dir: dir, Resume: c.resume}}
		tr, err := New(b.c, w, m, o, opts)
		require.NoError(t, err)
		require.Equal(t, 1, w.written, "resume %q: ParamsWritten calls after New", c.resume)
		res, err := tr.Fit(context.Background(), train, test)
		require.NoError(t, err)
		require.Equal(t, c.steps, res.Steps)
		require.Equal(t, c.want, w.written, "resume %q: ParamsWritten calls after Fit", c.resume)
		require.NoError(t, tr.Close())
		b.done()
	}
}
