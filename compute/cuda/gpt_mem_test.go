package cuda_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/models"
)

// A GPU without room for the bf16 GPT's activations: the model's Build
// returns an error that says what did not fit and wraps
// compute.ErrDeviceMemory, instead of the engine's panic.
func TestBF16GPTOutOfDeviceMemoryEmulated(t *testing.T) {
	d := cudatest.NewDevice()
	e := cuda.NewOnDevice(d, cuda.Options{})
	cfg := models.GPTConfig{Layers: 2, Heads: 2, Width: 64, Context: 64, Vocab: 256}
	m, err := models.NewGPT("gpt", cfg)
	require.NoError(t, err)
	specs := m.Params()
	offsets, n := models.Layout(specs)
	pt, gt := e.Alloc(n), e.Alloc(n)
	pa := compute.Arena{Dev: pt.(*cuda.Tensor).DevicePtr(), N: n}
	ga := compute.Arena{Dev: gt.(*cuda.Tensor).DevicePtr(), N: n}
	pv, gv := make([]compute.Tensor, len(specs)), make([]compute.Tensor, len(specs))
	for i, s := range specs {
		pv[i], gv[i] = e.View(pa, offsets[i], s.Shape...), e.View(ga, offsets[i], s.Shape...)
	}
	// 256 sequences of 64: about 99 MiB of activations, more than the 32
	// MiB given
	d.SetMemoryLimit(d.MemoryUsed() + 32<<20)
	err = m.Build(e, pv, gv, 256)
	require.Error(t, err)
	require.True(t, errors.Is(err, compute.ErrDeviceMemory), "%v", err)
	require.Contains(t, err.Error(), "build model gpt: activations of 256 sequences: cuda/cublas: ")

	// with room it builds
	d.SetMemoryLimit(0)
	m, err = models.NewGPT("gpt", cfg)
	require.NoError(t, err)
	before := e.TakenBytes()
	require.NoError(t, m.Build(e, pv, gv, 256))
	require.Greater(t, e.TakenBytes()-before, int64(32<<20), "the build needs more than the limit above gave")
	require.Equal(t, compute.PrecisionBF16, m.Precision())
}
