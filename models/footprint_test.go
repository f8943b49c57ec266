package models_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// The GPT-2 family by name has OpenAI's sizes: its parameter counts, less
// the 47 padding rows of wte, are the ones Hugging Face publishes for
// gpt2, gpt2-medium, gpt2-large and gpt2-xl (vocabulary 50257).
func TestGPT2FamilyPresets(t *testing.T) {
	for _, c := range []struct {
		name                 string
		layers, heads, width int
		params50257          int64
	}{
		{"gpt2", 12, 12, 768, 124_439_808},
		{"gpt2-medium", 24, 16, 1024, 354_823_168},
		{"gpt2-large", 36, 20, 1280, 774_030_080},
		{"gpt2-xl", 48, 25, 1600, 1_557_611_200},
	} {
		m, err := models.New(c.name, models.Config{})
		require.NoError(t, err, c.name)
		g := m.(*models.GPT).Config()
		assert.Equal(t, models.GPTConfig{Layers: c.layers, Heads: c.heads, Width: c.width, Context: 1024, Vocab: 50304}, g, c.name)
		f := models.FootprintOf(m, 1, 2)
		pad := int64(50304-models.GPT2Tokens) * int64(c.width)
		assert.Equal(t, c.params50257, f.Params-pad, "%s: parameters without the padding rows", c.name)
	}
}

// Config.Vocab replaces a preset's vocabulary (another tokenizer's).
func TestGPTVocabFromConfig(t *testing.T) {
	for _, name := range []string{"gpt", "gpt-tiny", "gpt2", "gpt2-xl"} {
		m, err := models.New(name, models.Config{Vocab: 32000})
		require.NoError(t, err, name)
		assert.Equal(t, 32000, m.(*models.GPT).Config().Vocab, name)
		assert.Equal(t, []int{32000, m.(*models.GPT).Config().Width}, m.Params()[0].Shape, "%s: wte", name)
		assert.Equal(t, 32000, m.Data().Classes, name)
	}
}

// FootprintOf counts the arenas (parameters, gradients, optimizer slots in
// fp32) and takes the activations from the model's estimate; a model
// without one gets -1 and its arenas alone.
func TestFootprintOf(t *testing.T) {
	m, err := models.New("gpt-tiny", models.Config{})
	require.NoError(t, err)
	_, n := models.Layout(m.Params())
	f := models.FootprintOf(m, 8, 2)
	assert.Equal(t, int64(n), f.Params)
	assert.Equal(t, int64(n)*4*4, f.ArenaBytes, "params, grads and two AdamW slots in fp32")
	act := m.(*models.GPT).ActivationBytes(8)
	assert.Equal(t, act, f.ActivationBytes)
	assert.Equal(t, f.ArenaBytes+act, f.Bytes())
	// docs/GPT.md: gpt-tiny at 8 sequences holds about 64 MiB of activations
	assert.InDelta(t, 64, float64(act)/(1<<20), 1)

	assert.Zero(t, f.CopyBytes, "fp32: no bf16 copy of the weights")

	// in bf16: the weights' bf16 copy, and the bf16 build's activations
	b, err := models.New("gpt-tiny", models.Config{Precision: compute.PrecisionBF16})
	require.NoError(t, err)
	fb := models.FootprintOf(b, 8, 2)
	assert.Equal(t, 2*f.Params, fb.CopyBytes)
	assert.Equal(t, b.(*models.GPT).ActivationBytes(8), fb.ActivationBytes)
	assert.Less(t, fb.ActivationBytes, act, "bf16 activations take less than fp32's")
	assert.Equal(t, fb.ArenaBytes+fb.CopyBytes+fb.ActivationBytes, fb.Bytes())

	mlp, err := models.New("mlp", models.Config{})
	require.NoError(t, err)
	f = models.FootprintOf(mlp, 256, 1)
	assert.Equal(t, int64(-1), f.ActivationBytes)
	assert.Equal(t, int64(784*256+256+256*256+256+256*10+10), f.Params)
	assert.Equal(t, f.ArenaBytes, f.Bytes())
	assert.Equal(t, f.Params*4*3, f.ArenaBytes)
}

// gpt2-xl at 16 sequences of 1024 in bf16 (docs/GPT.md's table): 39.76 GiB
// of activations without recompute, 5.25 GiB with --recompute block, and
// the weights' bf16 copy of 2.90 GiB besides.
func TestGPT2XLFootprintBF16(t *testing.T) {
	for _, c := range []struct {
		r   models.Recompute
		act int64
	}{
		{models.RecomputeNone, 42_686_676_992},
		{models.RecomputeBlock, 5_635_047_424},
	} {
		m, err := models.New("gpt2-xl", models.Config{Precision: compute.PrecisionBF16, Recompute: c.r})
		require.NoError(t, err)
		f := models.FootprintOf(m, 16, 2)
		assert.Equal(t, c.act, f.ActivationBytes, "--recompute %s", c.r)
		assert.Equal(t, 2*f.Params, f.CopyBytes)
	}
}
