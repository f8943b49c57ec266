package models_test

import (
	"fmt"
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

// smallDecoder is a decoder that is neither GPT nor Llama, of the public
// layers: learned positions, pre-LayerNorm blocks with causal attention and
// a 2C MLP with a standalone GELU, a final LayerNorm and a head of its own
// (not tied to the embedding), at a width that finite differences can check
// in full.
func smallDecoder() models.DecoderSpec {
	const c, t = 8, 5
	linear := func(name string, in, out int) *models.Linear {
		l := models.NewLinear(name, in, out, compute.Identity)
		l.WeightInit, l.WeightStd = models.Normal, 0.02
		return l
	}
	return models.DecoderSpec{
		Vocab: 11, Context: t, Width: c, Layers: 2,
		Embedding: "tok", EmbeddingStd: 0.02, Positions: "pos", PositionStd: 0.02,
		Block: func(i int, _ *models.ScratchPool) []models.Layer {
			p := fmt.Sprintf("b%d.", i)
			return []models.Layer{
				models.NewResidual(p+"attn", models.NewLayerNorm(p+"ln1", c),
					linear(p+"qkv", c, 3*c),
					models.NewCausalSelfAttention(p+"attn", t, c, 2),
					linear(p+"out", c, c)),
				models.NewResidual(p+"mlp", models.NewLayerNorm(p+"ln2", c),
					linear(p+"fc", c, 2*c), models.NewGELU(), linear(p+"proj", 2*c, c)),
			}
		},
		Norm: func() models.Layer { return models.NewLayerNorm("ln_f", c) },
		Head: "head", HeadStd: 0.02,
	}
}

// The whole model's gradient, positions and the untied head included,
// against central differences of its summed loss, on every CPU BLAS;
// ready reports parameters down the arena, the embeddings last.
func TestDecoderGradients(t *testing.T) {
	for name, e := range gradcheck.Engines(t) {
		t.Run(name, func(t *testing.T) {
			m, err := models.NewDecoder("dec", smallDecoder())
			require.NoError(t, err)
			r := newLMRun(t, e, m, 2, 1, 5)
			checkLMGradients(t, m, r.p, r.g, r.loss)
		})
	}
}

// GPT-2's and Llama's specs, built as plain Decoders, train to the same
// bits as GPT and Llama: the two models are their specs and nothing else
// on the CPU.
func TestDecoderOfSpecsKeepsBits(t *testing.T) {
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	gpt, err := models.NewGPT("gpt", smallGPT)
	require.NoError(t, err)
	llama, err := models.NewLlama("llama", smallLlama)
	require.NoError(t, err)
	for _, c := range []struct {
		m    models.Model
		spec models.DecoderSpec
	}{{gpt, smallGPT.DecoderSpec()}, {llama, smallLlama.DecoderSpec()}} {
		d, err := models.NewDecoder(c.m.Name(), c.spec)
		require.NoError(t, err)
		require.Equal(t, c.m.Params(), d.Params())
		wantP, wantG := trainSteps(t, e, c.m, 2, 2)
		p, g := trainSteps(t, e, d, 2, 2)
		ok, i := bitsEqual(wantG, g)
		assert.True(t, ok, "%s: first gradients differ at %d", c.m.Name(), i)
		ok, i = bitsEqual(wantP, p)
		assert.True(t, ok, "%s: parameters differ at %d", c.m.Name(), i)
	}
}

// A spec without its parts or sizes, a recompute mode its blocks do not
// take and a second build are errors.
func TestDecoderErrors(t *testing.T) {
	for _, c := range []struct {
		change func(*models.DecoderSpec)
		want   string
	}{
		{func(s *models.DecoderSpec) { s.Vocab = 1 }, "vocabulary 1, context 5, width 8, layers 2: need at least 2 tokens"},
		{func(s *models.DecoderSpec) { s.Layers = 0 }, "layers 0: need at least"},
		{func(s *models.DecoderSpec) { s.Head = "" }, `embedding "tok", head "": a decoder names both`},
		{func(s *models.DecoderSpec) { s.Norm = nil }, "a decoder needs a Block and a Norm function"},
		{func(s *models.DecoderSpec) { s.Embedding, s.Positions = "x", "x" }, `build model dec: two parameters are named "x"`},
	} {
		s := smallDecoder()
		c.change(&s)
		d, err := models.NewDecoder("dec", s)
		if err == nil {
			e, cerr := cpu.New(cpu.Options{Threads: 1})
			require.NoError(t, cerr)
			err = buildOnHost(e, d)
		}
		if assert.Error(t, err, c.want) {
			assert.Contains(t, err.Error(), c.want)
		}
	}
	d, err := models.NewDecoder("dec", smallDecoder())
	require.NoError(t, err)
	assert.EqualError(t, d.SetRecompute(models.RecomputeGELU),
		"recompute gelu: the blocks of dec share no MLP hidden activation (it takes none and block)")
	require.NoError(t, d.SetRecompute(models.RecomputeBlock))
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	require.NoError(t, buildOnHost(e, d))
	assert.EqualError(t, buildOnHost(e, d), "build model dec: built twice")
	assert.EqualError(t, d.SetRecompute(models.RecomputeNone), "recompute none: the model is built already")
}

// A preset's spec given another Context keeps the preset's attention,
// which splits rows into sequences of its own context: NewDecoder refuses
// it (it trained silently: 32-token windows attended four at a time as one
// sequence of 128, 256-token windows never looked back past 128), and the
// spec made from a config of that context is taken.
func TestDecoderRefusesAttentionOfAnotherContext(t *testing.T) {
	for _, c := range []struct {
		spec func() models.DecoderSpec
		t    int
		want string
	}{
		{models.GPTTiny.DecoderSpec, 32, "decoder m: h.0.attn attends within sequences of 128 positions, the spec's Context is 32"},
		{models.GPTTiny.DecoderSpec, 256, "decoder m: h.0.attn attends within sequences of 128 positions, the spec's Context is 256"},
		{models.LlamaTiny.DecoderSpec, 64, "decoder m: model.layers.0.self_attn attends within sequences of 128 positions, the spec's Context is 64"},
	} {
		s := c.spec()
		s.Context = c.t
		_, err := models.NewDecoder("m", s)
		if assert.Error(t, err) {
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), "set the config's Context, then call DecoderSpec again")
		}
	}
	g := models.GPTTiny
	g.Context = 32
	_, err := models.NewDecoder("m", g.DecoderSpec())
	assert.NoError(t, err)
}

// buildOnHost builds m for 2 sequences over fresh host arenas.
func buildOnHost(e compute.Engine, m models.Model) error {
	specs := m.Params()
	offsets, n := models.Layout(specs)
	p, g := make([]float32, n), make([]float32, n)
	var pv, gv []compute.Tensor
	for i, s := range specs {
		pv = append(pv, e.View(compute.HostArena(p), offsets[i], s.Shape...))
		gv = append(gv, e.View(compute.HostArena(g), offsets[i], s.Shape...))
	}
	return m.Build(e, pv, gv, 2)
}

// A language model that is neither GPT nor Llama, from the public layers:
// pre-norm blocks of multi-query attention with the rotary embedding (no
// position table) and a ReLU MLP, and a head of its own.
func ExampleNewDecoder() {
	const c, t = 64, 32
	m, err := models.NewDecoder("mqa", models.DecoderSpec{
		Vocab: 256, Context: t, Width: c, Layers: 2,
		Embedding: "embed.weight", EmbeddingStd: 0.02,
		Block: func(i int, _ *models.ScratchPool) []models.Layer {
			p := fmt.Sprintf("layers.%d.", i)
			return []models.Layer{
				models.NewResidual(p+"attn", models.NewRMSNorm(p+"attn_norm", c, 1e-5),
					models.NewGroupedSelfAttention(p+"attn", t, c, 4, 1, 10000, 0.02, 0.01)),
				models.NewResidual(p+"mlp", models.NewRMSNorm(p+"mlp_norm", c, 1e-5),
					models.NewLinear(p+"mlp.fc", c, 2*c, compute.ReLU),
					models.NewLinear(p+"mlp.proj", 2*c, c, compute.Identity)),
			}
		},
		Norm: func() models.Layer { return models.NewRMSNorm("norm", c, 1e-5) },
		Head: "head", HeadStd: 0.02,
	})
	if err != nil {
		panic(err)
	}
	n := 0
	for _, p := range m.Params() {
		n += p.Size()
	}
	ps := m.Params()
	fmt.Println(len(ps), "tensors,", n, "parameters")
	fmt.Println("first", ps[0].Name, ps[0].Shape, "last", ps[len(ps)-1].Name, ps[len(ps)-1].Shape)
	fmt.Printf("%.4g FLOPs per token\n", m.FLOPsPerToken())
	// Output:
	// 23 tensors, 86720 parameters
	// first embed.weight [256 64] last head.weight [256 64]
	// 5.449e+05 FLOPs per token
}

// A decoder runs in bf16 only where every part has a bf16 form at its
// sizes: at bf16 the first that has none is an error naming it, at auto the
// model runs in fp32 and its build report says why; on the CPU engine auto
// is fp32 without a word and bf16 names the engine.
func TestDecoderBF16Refusals(t *testing.T) {
	c := 64
	spec := func(block func(p string) []models.Layer) models.DecoderSpec {
		return models.DecoderSpec{Vocab: 256, Context: 64, Width: c, Layers: 1, Embedding: "wte", EmbeddingStd: 0.02,
			Positions: "wpe", PositionStd: 0.02, Head: "head", HeadStd: 0.02,
			Block: func(i int, _ *models.ScratchPool) []models.Layer { return block(fmt.Sprintf("b%d.", i)) },
			Norm:  func() models.Layer { return models.NewLayerNorm("ln_f", c) }}
	}
	for _, tc := range []struct {
		name  string
		block func(p string) []models.Layer
		want  string
	}{
		{"a ReLU MLP", func(p string) []models.Layer {
			return []models.Layer{models.NewResidual(p+"mlp", models.NewLayerNorm(p+"ln", c),
				models.NewLinear(p+"fc", c, 2*c, compute.ReLU), models.NewLinear(p+"proj", 2*c, c, compute.Identity))}
		}, "b0.fc: engine cuda/cublas has no bf16 Linear with ReLU (compute.BF16Tensors)"},
		{"a block without a norm first", func(p string) []models.Layer {
			return []models.Layer{models.NewResidual(p+"mlp", models.NewLinear(p+"fc", c, c, compute.Identity),
				models.NewLinear(p+"proj", c, c, compute.Identity))}
		}, "b0.mlp: its first layer *models.Linear cannot add its input gradient into the residual stream's in bf16"},
		{"a layer without a bf16 form", func(p string) []models.Layer {
			return []models.Layer{models.NewResidual(p+"mlp", models.NewLayerNorm(p+"ln", c), models.NewLinear(p+"fc", c, c, compute.Identity),
				models.NewGELU(), models.NewLinear(p+"proj", c, c, compute.Identity))}
		}, "b0.mlp: layer 2: *models.GELU has no bf16 form"},
		{"a Llama block of a head size the attention kernels do not take", func(p string) []models.Layer {
			return []models.Layer{models.NewResidual(p+"attn", models.NewRMSNorm(p+"norm", c, 1e-5),
				models.NewGroupedSelfAttention(p+"attn", 64, c, 4, 2, 1e4, 0.02, 0.02))}
		}, "b0.attn: layer 1: b0.attn: a shape the bf16 kernels do not take: head size 16: the attention kernels need 32 or 64"},
	} {
		for _, p := range []compute.Precision{compute.PrecisionBF16, compute.PrecisionAuto} {
			d, err := models.NewDecoder("lm", spec(tc.block))
			require.NoError(t, err)
			require.NoError(t, d.SetPrecision(p))
			e := cudatest.NewEmulated(cuda.Options{})
			pv := deviceViews(e, d)
			err = d.Build(e, pv, pv, 1)
			if p == compute.PrecisionBF16 {
				require.Error(t, err, tc.name)
				assert.Contains(t, err.Error(), tc.want, tc.name)
				continue
			}
			require.NoError(t, err, tc.name)
			assert.Equal(t, compute.PrecisionF32, d.Precision(), tc.name)
			line, warn := d.BuildReport()
			assert.True(t, warn, tc.name)
			assert.Contains(t, line, tc.want, tc.name)
		}
	}
	ce, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	for _, p := range []compute.Precision{compute.PrecisionBF16, compute.PrecisionAuto} {
		d, err := models.NewDecoder("lm", smallDecoder())
		require.NoError(t, err)
		require.NoError(t, d.SetPrecision(p))
		err = buildOnHost(ce, d)
		if p == compute.PrecisionBF16 {
			assert.EqualError(t, err, "build model lm: precision bf16: engine "+ce.Name()+" has no bf16 tensors (compute.BF16Tensors)")
			continue
		}
		require.NoError(t, err)
		line, warn := d.BuildReport()
		assert.Equal(t, "", line)
		assert.False(t, warn)
	}
}
