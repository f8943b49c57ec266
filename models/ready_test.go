package models_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/models"
)

// arenaViews are views of m's parameters and gradients in fresh arenas of
// e: device memory on the CUDA engine, host slices on the CPU's.
func arenaViews(e compute.Engine, m models.Model) (pv, gv []compute.Tensor) {
	if _, ok := e.(*cuda.Engine); ok {
		return deviceViews(e, m), deviceViews(e, m)
	}
	specs := m.Params()
	offsets, n := models.Layout(specs)
	a, g := make([]float32, n), make([]float32, n)
	for i, s := range specs {
		pv = append(pv, e.View(compute.HostArena(a), offsets[i], s.Shape...))
		gv = append(gv, e.View(compute.HostArena(g), offsets[i], s.Shape...))
	}
	return pv, gv
}

// readyCalls builds m on e for one row (a sequence of its context, or one
// sample), runs a forward and a backward, and returns what Backward
// reported ready, in order.
func readyCalls(t *testing.T, e compute.Engine, m models.Model) []int {
	t.Helper()
	pv, gv := arenaViews(e, m)
	require.NoError(t, m.Build(e, pv, gv, 1))
	spec := m.Data()
	in := models.Inputs{Targets: e.AllocLabels(spec.Targets)}
	if spec.Tokens {
		in.Tokens = e.AllocLabels(spec.InputSize())
	} else {
		in.X = e.Alloc(append([]int{1}, spec.Input...)...)
	}
	m.Forward(in, 1, e.Alloc(3))
	var got []int
	m.Backward(func(first int) { got = append(got, first) })
	return got
}

// TestReadyPerLayerOnCUDA: on the CUDA engine (emulated) Backward reports
// each layer's parameters ready as it finishes them, as on the CPU, so the
// device step path can reduce gradient buckets while backward runs: the
// mlp's three Linear layers from the last, and the fp32 GPT's and Llama's
// final norm, each residual block (attention, MLP) and the embeddings (the
// bf16 GPT's: TestBF16GPTReadyPerBlock).
func TestReadyPerLayerOnCUDA(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func() models.Model
		want []int // nil: as on the CPU, final norm + residual blocks + embeddings
	}{
		{"mlp", func() models.Model {
			m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16, 16}, Classes: 4})
			require.NoError(t, err)
			return m
		}, []int{4, 2, 0}},
		{"gpt fp32", func() models.Model {
			m, err := models.NewGPT("gpt", models.GPTConfig{Layers: 3, Heads: 2, Width: 32, Context: 16, Vocab: 64})
			require.NoError(t, err)
			require.NoError(t, m.SetPrecision(compute.PrecisionF32))
			return m
		}, nil},
		{"llama fp32", func() models.Model {
			m, err := models.NewLlama("llama", models.LlamaConfig{Layers: 3, Width: 32, Heads: 4, KVHeads: 2, FFNMultiple: 32,
				Context: 16, Vocab: 256, RopeTheta: 10000})
			require.NoError(t, err)
			return m
		}, nil},
	} {
		ce, err := cpu.New(cpu.Options{Threads: 1})
		require.NoError(t, err)
		onCPU := readyCalls(t, ce, tc.make())
		onGPU := readyCalls(t, cudatest.NewEmulated(cuda.Options{}), tc.make())
		want := tc.want
		if want == nil {
			require.Len(t, onCPU, 2*3+2, "%s: the final norm, each layer's attention and MLP blocks, the embeddings", tc.name)
			want = onCPU
		}
		require.Equal(t, want, onCPU, tc.name)
		require.Equal(t, want, onGPU, tc.name)
		for i := 1; i < len(onGPU); i++ {
			require.Less(t, onGPU[i], onGPU[i-1], "%s: ready goes from the last parameters to the first", tc.name)
		}
		require.Zero(t, onGPU[len(onGPU)-1], tc.name)
	}
}
