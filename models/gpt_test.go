package models_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/internal/gradcheck"
	"github.com/symddp/symddp/models"
)

// smallGPT is gpt-tiny's structure at a width that finite differences can
// check in full.
var smallGPT = models.GPTConfig{Layers: 2, Heads: 2, Width: 8, Context: 5, Vocab: 11}

// gptRun is a GPT built on an engine over host arenas.
type gptRun struct {
	e     compute.Engine
	m     *models.GPT
	p, g  []float32
	pv    compute.Tensor
	in    models.Inputs
	stats compute.Tensor
}

func newGPTRun(t *testing.T, e compute.Engine, cfg models.GPTConfig, rows int, seed uint64) *gptRun {
	m, err := models.NewGPT("gpt", cfg)
	require.NoError(t, err)
	specs := m.Params()
	offsets, n := models.Layout(specs)
	r := &gptRun{e: e, m: m, p: make([]float32, n), g: make([]float32, n)}
	pa, ga := compute.HostArena(r.p), compute.HostArena(r.g)
	var pv, gv []compute.Tensor
	dst := make([][]float32, len(specs))
	for i, s := range specs {
		pv = append(pv, e.View(pa, offsets[i], s.Shape...))
		gv = append(gv, e.View(ga, offsets[i], s.Shape...))
		dst[i] = r.p[offsets[i] : offsets[i]+s.Size()]
	}
	models.InitParams(specs, seed, dst)
	// Larger than GPT-2's 0.02, so that the check sees every path's
	// gradient well above float32 rounding.
	for i := range r.p {
		r.p[i] *= 5
	}
	require.NoError(t, m.Build(e, pv, gv, rows))
	rnd := rand.New(rand.NewPCG(seed, 5))
	bt := rows * cfg.Context
	tok, tgt := make([]int32, bt), make([]int32, bt)
	for i := range tok {
		tok[i], tgt[i] = int32(rnd.IntN(cfg.Vocab)), int32(rnd.IntN(cfg.Vocab))
	}
	tgt[1] = -1 // an ignored target
	r.in = models.Inputs{Tokens: e.AllocLabels(bt), Targets: e.AllocLabels(bt)}
	e.SetLabels(r.in.Tokens, tok)
	e.SetLabels(r.in.Targets, tgt)
	r.stats = e.Alloc(3)
	return r
}

func (r *gptRun) loss() float64 {
	r.e.Zero(r.stats)
	r.m.Forward(r.in, 1, r.stats)
	return float64(compute.HostData(r.stats)[0])
}

// The whole model's gradient, tied wte included, against central
// differences of its summed loss, on every CPU BLAS.
func TestGPTGradients(t *testing.T) {
	for name, e := range gradcheck.Engines(t) {
		t.Run(name, func(t *testing.T) {
			r := newGPTRun(t, e, smallGPT, 2, 1)
			checkLMGradients(t, r.m, r.p, r.g, r.loss)
		})
	}
}

// In fp32 the CUDA engine runs the model on its operation groups, and an
// engine without them fails the build with one line naming the engine and
// the operation; in bf16 the CUDA engine runs the layers' bf16 plans and
// says which shapes its kernels take, and by default (auto) a shape they do
// not take runs the fp32 groups, saying why.
func TestGPTNeedsOperationGroups(t *testing.T) {
	build := func(p compute.Precision, plain bool) error {
		_, err := buildOn(t, p, plain)
		return err
	}
	require.NoError(t, build(compute.PrecisionF32, false))
	err := build(compute.PrecisionF32, true)
	var missing *compute.MissingOpError
	require.ErrorAs(t, err, &missing)
	assert.Contains(t, err.Error(), "cuda")
	// a shape the bf16 kernels do not take (head size 4): bf16 is refused,
	// auto runs the fp32 operation groups and says why
	err = build(compute.PrecisionBF16, false)
	require.ErrorIs(t, err, compute.ErrBF16Shape)
	assert.Contains(t, err.Error(), "head size of 32 or 64")
	m, err := buildOn(t, compute.PrecisionAuto, false)
	require.NoError(t, err)
	assert.Equal(t, compute.PrecisionF32, m.Precision())
	require.ErrorIs(t, m.FP32Reason(), compute.ErrBF16Shape)
	assert.Contains(t, m.FP32Reason().Error(), "head size of 32 or 64")
	line, warn := m.BuildReport()
	assert.True(t, warn)
	assert.Contains(t, line, "runs in fp32 on the engine's per-layer operations, not in bf16 (much slower): h.0.attn: layer 2: h.0.attn: ")
	// the engine seen without its groups has no bf16 at all: auto runs
	// fp32 without a word, bf16 names what is missing
	err = build(compute.PrecisionBF16, true)
	require.ErrorAs(t, err, &missing)
	assert.Contains(t, err.Error(), "has no bf16 tensors (compute.BF16Tensors)")
	m, err = models.NewGPT("gpt", smallGPT)
	require.NoError(t, err)
	assert.ErrorContains(t, m.SetPrecision("fp16"), `precision "fp16"`)
}

// buildOn builds smallGPT at precision p on an emulated CUDA engine, seen
// through compute.Engine alone (none of its groups) when plain.
func buildOn(t *testing.T, p compute.Precision, plain bool) (*models.GPT, error) {
	m, err := models.NewGPT("gpt", smallGPT)
	require.NoError(t, err)
	require.NoError(t, m.SetPrecision(p))
	ce := cudatest.NewEmulated(cuda.Options{})
	pv := deviceViews(ce, m)
	var e compute.Engine = ce
	if plain {
		e = struct{ compute.Engine }{ce}
	}
	return m, m.Build(e, pv, pv, 1)
}

func TestGPTConfigErrors(t *testing.T) {
	_, err := models.NewGPT("gpt", models.GPTConfig{Layers: 1, Heads: 3, Width: 128, Context: 8, Vocab: 256})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "3 heads do not divide the width 128")
	m, err := models.New("gpt-tiny", models.Config{})
	require.NoError(t, err)
	assert.Equal(t, models.GPTTiny, m.(*models.GPT).Config())
	m, err = models.New("gpt2", models.Config{Layers: 2})
	require.NoError(t, err)
	assert.Equal(t, 2, m.(*models.GPT).Config().Layers)
	// GPT-2 124M's parameter count (vocabulary padded to 50304).
	m, err = models.New("gpt2", models.Config{})
	require.NoError(t, err)
	_, n := models.Layout(m.Params())
	assert.Equal(t, 124475904, n)
}

// The sampler of a model on the CUDA engine (emulated here) runs in bf16:
// its logits at a position agree with the fp32 CPU engine's to bf16
// precision, and Generate draws through them.
func TestBF16SamplerMatchesCPU(t *testing.T) {
	cfg := models.GPTConfig{Layers: 1, Heads: 2, Width: 64, Context: 64, Vocab: 256}
	m, err := models.NewGPT("gpt", cfg)
	require.NoError(t, err)
	params := models.InitArena(m.Params(), 9)
	for i := range params {
		params[i] *= 5 // logits well apart
	}
	ce, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	ge := cudatest.NewEmulated(cuda.Options{})
	cs, err := models.NewSampler(m, ce, params)
	require.NoError(t, err)
	gs, err := models.NewSampler(m, ge, params)
	require.NoError(t, err)
	assert.Equal(t, compute.PrecisionF32, cs.Precision())
	assert.Equal(t, compute.PrecisionBF16, gs.Precision(), "the CUDA engine's sampler runs in bf16")

	tok := make([]int32, cfg.Context)
	for i := range tok {
		tok[i] = int32((i*37 + 11) % cfg.Vocab)
	}
	ct, cy := ce.AllocLabels(cfg.Context), ce.AllocLabels(cfg.Context)
	ce.SetLabels(ct, tok)
	ce.SetLabels(cy, tok)
	cs.Forward(models.Inputs{Tokens: ct, Targets: cy}, 1, ce.Alloc(3))
	all := compute.HostData(cs.Logits())
	gt := ge.AllocLabels(cfg.Context)
	ge.SetLabels(gt, tok)
	got := make([]float32, cfg.Context*cfg.Vocab)
	ge.ReadTensor(got, gs.ForwardLogits(gt)) // bf16 logits, widened
	for _, row := range []int{0, 17, cfg.Context - 1} {
		got := got[row*cfg.Vocab : (row+1)*cfg.Vocab]
		want := all[row*cfg.Vocab : (row+1)*cfg.Vocab]
		scale := 0.0
		for _, v := range want {
			scale = math.Max(scale, math.Abs(float64(v)))
		}
		for j := range want {
			require.InDelta(t, want[j], got[j], 0.03*scale, "position %d, token %d", row, j)
		}
	}
	out, err := gs.Generate(context.Background(), tok[:5], 6, models.SampleOptions{Temperature: 0.8, TopK: 5, Seed: 1})
	require.NoError(t, err)
	// drawn by the fused GPT (compute/cuda/gpt.go at commit 7271189) before
	// per-layer bf16 plans replaced it: the same kernels, the same draws
	require.Equal(t, []int32{164, 237, 75, 241, 105, 155}, out)
	again, err := gs.Generate(context.Background(), tok[:5], 6, models.SampleOptions{Temperature: 0.8, TopK: 5, Seed: 1})
	require.NoError(t, err)
	assert.Equal(t, out, again, "the same seed draws the same tokens")
}

// A sampler on a GPU without room for it: an error that wraps
// compute.ErrDeviceMemory, not the engine's panic.
func TestSamplerOutOfDeviceMemory(t *testing.T) {
	cfg := models.GPTConfig{Layers: 1, Heads: 2, Width: 64, Context: 64, Vocab: 256}
	m, err := models.NewGPT("gpt", cfg)
	require.NoError(t, err)
	d := cudatest.NewDevice()
	e := cuda.NewOnDevice(d, cuda.Options{})
	d.SetMemoryLimit(d.MemoryUsed() + 1<<20) // not the engine's first 64 MiB pool chunk
	s, err := models.NewSampler(m, e, models.InitArena(m.Params(), 1))
	require.Nil(t, s)
	require.ErrorIs(t, err, compute.ErrDeviceMemory)
	assert.Contains(t, err.Error(), "sampler for gpt")
}

// In bf16 Backward reports the parameters ready block by block, as in fp32
// (the trainer reduces each bucket as its blocks finish), and the build
// says what runs.
func TestBF16GPTReadyPerBlock(t *testing.T) {
	ready := func(e compute.Engine, p compute.Precision) []int {
		m, err := models.NewGPT("gpt", models.GPTConfig{Layers: 2, Heads: 2, Width: 64, Context: 64, Vocab: 256})
		require.NoError(t, err)
		require.NoError(t, m.SetPrecision(p))
		pv, gv := arenaViews(e, m)
		require.NoError(t, m.Build(e, pv, gv, 1))
		require.Equal(t, p, m.Precision())
		line, warn := m.BuildReport()
		if p == compute.PrecisionBF16 {
			assert.False(t, warn)
			assert.Equal(t, "runs in bf16 (fp32 master weights, gradients and accumulation) through per-layer plans: "+
				"cuBLASLt GEMMs with bias, GELU and the residual add in their epilogues, bias gradients by sdc_bias_act_backward, "+
				"flash attention (wmma), fused classifier (the logits' gradient overwrites them)", line)
		}
		tok := e.AllocLabels(64)
		m.Forward(models.Inputs{Tokens: tok, Targets: tok}, 1, e.Alloc(3))
		var got []int
		m.Backward(func(first int) { got = append(got, first) })
		return got
	}
	ce, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	want := ready(ce, compute.PrecisionF32)
	require.Len(t, want, 2*2+2, "the final norm, each block, the embeddings")
	assert.Equal(t, want, ready(cudatest.NewEmulated(cuda.Options{}), compute.PrecisionBF16))
}
