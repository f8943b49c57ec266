package ddp

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// A GPU without room for the model's activations ends New with an error
// that says what ran out (errors.Is compute.ErrDeviceMemory), not with the
// engine's panic: Alloc returns no error, so the trainer's build recovers
// the *compute.DeviceMemoryError it panics with.
func TestNewOutOfDeviceMemory(t *testing.T) {
	w := newWorldOf(1, cuda.Options{DisableGraphs: true})
	d := w.devs[0]
	// room for the engine's first 64 MiB pool chunk (the arenas), not for a
	// 2048 x 16384 activation (128 MiB)
	d.SetMemoryLimit(d.MemoryUsed() + 100<<20)
	m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16384}, Classes: 4})
	require.NoError(t, err)
	o, err := optim.NewSGD(optim.SGDConfig{})
	require.NoError(t, err)
	tr, err := New(w.comm(0), w.engs[0], m, o, Options{GlobalBatch: 2048, Epochs: 1, LR: 0.1, Seed: 1})
	require.Nil(t, tr)
	require.Error(t, err)
	require.True(t, errors.Is(err, compute.ErrDeviceMemory), "%v", err)
	require.Contains(t, err.Error(), "build model mlp for 2048 rows")
	var dm *compute.DeviceMemoryError
	require.True(t, errors.As(err, &dm))
	require.EqualValues(t, 2048*16384*4, dm.Bytes, "the activation the device refused")

	// the same model with room builds
	m, err = models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16384}, Classes: 4})
	require.NoError(t, err)
	w = newWorldOf(1, cuda.Options{DisableGraphs: true})
	tr, err = New(w.comm(0), w.engs[0], m, o, Options{GlobalBatch: 2048, Epochs: 1, LR: 0.1, Seed: 1})
	require.NoError(t, err)
	require.NoError(t, tr.Close())
}

// A GPU with room for the model but not for AdamW's two moments ends Fit
// before its first step with an error that names the optimizer's state
// (errors.Is compute.ErrDeviceMemory), not with the engine's panic inside
// the first update, which allocated them before.
func TestFitOutOfDeviceMemoryForOptimizerState(t *testing.T) {
	w := newWorldOf(1, cuda.Options{DisableGraphs: true})
	d := w.devs[0]
	// 2048 x 8192 + ...: about 16.9M parameters, 67 MiB each for the
	// parameters, the gradients and each of AdamW's moments
	m, err := models.New("mlp", models.Config{Input: []int{2048}, Hidden: []int{8192}, Classes: 4})
	require.NoError(t, err)
	o, err := optim.New("adamw", optim.Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	require.NoError(t, err)
	tr, err := New(w.comm(0), w.engs[0], m, o, Options{GlobalBatch: 16, Epochs: 1, LR: 1e-3, Seed: 1})
	require.NoError(t, err)
	defer tr.Close()
	d.SetMemoryLimit(d.MemoryUsed() + 100<<20) // room for one moment, not two
	train, _, err := datasets.SyntheticSplit(32, 8, 2048, 4, 7)
	require.NoError(t, err)
	res, err := tr.Fit(context.Background(), train, nil)
	require.Error(t, err)
	require.True(t, errors.Is(err, compute.ErrDeviceMemory), "%v", err)
	require.Contains(t, err.Error(), "the adamw optimizer's state over")
	require.Zero(t, res.Steps, "no step ran")
}

// failingBuild is a model whose Build fails with err.
type failingBuild struct {
	models.Model
	err error
}

func (f failingBuild) Build(compute.Engine, []compute.Tensor, []compute.Tensor, int) error {
	return f.err
}

// New names the model and the rows of a failed build once: a model's own
// error that names it already ("build model mlp: ...", as the library's
// models say it) is not wrapped in "build model mlp for 8 rows: " again.
func TestNewBuildErrorNamesTheModelOnce(t *testing.T) {
	inner, err := models.New("mlp", models.Config{Input: []int{4}, Hidden: []int{8}, Classes: 2})
	require.NoError(t, err)
	o, err := optim.NewSGD(optim.SGDConfig{})
	require.NoError(t, err)
	for _, c := range []struct{ err, want string }{
		{"build model mlp: layer 2: too wide", "build model mlp: layer 2: too wide (for 8 rows)"},
		{"layer 2: too wide", "build model mlp for 8 rows: layer 2: too wide"},
	} {
		w := newWorldOf(1, cuda.Options{DisableGraphs: true})
		_, err := New(w.comm(0), w.engs[0], failingBuild{inner, errors.New(c.err)}, o, Options{GlobalBatch: 8, Epochs: 1, LR: 0.1, Seed: 1})
		require.Error(t, err)
		require.Equal(t, c.want, err.Error())
	}
}
