package cuda_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/models"
)

// The bf16 GPT's gradient against the fp32 CPU engine's, parameter by
// parameter: each tensor's within 5% of the CPU's in L2 norm. Every path
// counts, the bias gradients (sdc_bias_act_backward) too: the loss curves of
// ddp's bf16 tests do not see a missing or misplaced bias gradient (one
// that was never written passed them all).
func bf16GradientsMatchCPU(t *testing.T, e *cuda.Engine) {
	cfg := models.GPTConfig{Layers: 2, Heads: 2, Width: 64, Context: 64, Vocab: 256}
	ce, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	want, cm := gptGradients(t, ce, cfg, 2)
	got, gm := gptGradients(t, e, cfg, 2)
	require.Equal(t, compute.PrecisionF32, cm.Precision())
	require.Equal(t, compute.PrecisionBF16, gm.Precision(), "the CUDA engine runs the GPT's layers in bf16")
	compareGradients(t, want, got, cm.Params(), 0.05)
}

func TestBF16GPTGradientsMatchCPUEmulated(t *testing.T) {
	bf16GradientsMatchCPU(t, cudatest.NewEmulated(cuda.Options{}))
}

func TestBF16GPTGradientsMatchCPUGPU(t *testing.T) { bf16GradientsMatchCPU(t, gpuEngine(t)) }

// gptGradients builds a GPT of cfg on e over arenas of e's memory (device
// arenas on a device engine), runs one forward and backward of rows
// sequences of a fixed batch, and returns the whole gradient arena (laid
// out as models.Layout lays out m.Params()) and the model. The parameters
// are GPT-2's initialisation times 3, so that every path's gradient stands
// well above bf16's rounding.
func gptGradients(t testing.TB, e compute.Engine, cfg models.GPTConfig, rows int) ([]float32, *models.GPT) {
	t.Helper()
	m, err := models.NewGPT("gpt", cfg)
	require.NoError(t, err)
	specs := m.Params()
	offsets, n := models.Layout(specs)
	p := models.InitArena(specs, 11)
	for i := range p {
		p[i] *= 3
	}
	pt, gt := e.Alloc(n), e.Alloc(n)
	e.SetTensor(pt, p)
	e.Zero(gt)
	arena := func(x compute.Tensor) compute.Arena {
		if d, ok := x.(interface{ DevicePtr() uintptr }); ok {
			return compute.Arena{Dev: d.DevicePtr(), N: n}
		}
		return compute.HostArena(compute.HostData(x))
	}
	pa, ga := arena(pt), arena(gt)
	pv, gv := make([]compute.Tensor, len(specs)), make([]compute.Tensor, len(specs))
	for i, s := range specs {
		pv[i], gv[i] = e.View(pa, offsets[i], s.Shape...), e.View(ga, offsets[i], s.Shape...)
	}
	require.NoError(t, m.Build(e, pv, gv, rows))
	bt := rows * cfg.Context
	tok, tgt := make([]int32, bt), make([]int32, bt)
	for i := range tok {
		tok[i], tgt[i] = int32((i*37+5)%cfg.Vocab), int32((i*11+3)%cfg.Vocab)
	}
	in := models.Inputs{Tokens: e.AllocLabels(bt), Targets: e.AllocLabels(bt)}
	e.SetLabels(in.Tokens, tok)
	e.SetLabels(in.Targets, tgt)
	stats := e.Alloc(3)
	e.Zero(stats)
	m.Forward(in, 1, stats)
	m.Backward(nil)
	g := make([]float32, n)
	e.ReadTensor(g, gt)
	return g, m
}

// compareGradients checks got against want, gradient arenas of specs laid
// out by models.Layout, parameter by parameter: each tensor's gradient
// within tol of want's in relative L2 norm (want's never zero), and logs
// the largest difference.
func compareGradients(t testing.TB, want, got []float32, specs []models.ParamSpec, tol float64) {
	t.Helper()
	offsets, n := models.Layout(specs)
	require.Len(t, want, n)
	require.Len(t, got, n)
	worst, worstName := 0.0, ""
	for i, s := range specs {
		var d, r float64
		for j := offsets[i]; j < offsets[i]+s.Size(); j++ {
			e := float64(got[j]) - float64(want[j])
			d += e * e
			r += float64(want[j]) * float64(want[j])
		}
		require.Greater(t, r, 0.0, "parameter %d (%s): the reference gradient is zero", i, s.Name)
		rel := math.Sqrt(d / r)
		if rel > worst {
			worst, worstName = rel, s.Name
		}
		assert.Less(t, rel, tol, "parameter %d (%s): the gradient is %.3g of the reference's away (L2)", i, s.Name, rel)
	}
	t.Logf("largest relative L2 difference of a parameter's gradient: %.4f (%s)", worst, worstName)
}
