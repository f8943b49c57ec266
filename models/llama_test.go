package models_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/internal/gradcheck"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// smallLlama is llama-tiny's structure at a width that finite differences
// can check in full: 4 query heads of size 2 sharing 2 key/value heads, a
// small θ so that the rotation turns every pair by a large angle.
var smallLlama = models.LlamaConfig{Layers: 2, Width: 8, Heads: 4, KVHeads: 2, FFNHidden: 12,
	Context: 5, Vocab: 11, RopeTheta: 4}

// lmRun is a language model built on an engine over host arenas, with a
// batch of random tokens and targets.
type lmRun struct {
	e     compute.Engine
	m     models.Model
	p, g  []float32
	in    models.Inputs
	stats compute.Tensor
}

func newLMRun(t *testing.T, e compute.Engine, m models.Model, rows int, seed uint64, scale float32) *lmRun {
	specs := m.Params()
	offsets, n := models.Layout(specs)
	r := &lmRun{e: e, m: m, p: models.InitArena(specs, seed), g: make([]float32, n)}
	for i := range r.p {
		r.p[i] *= scale
	}
	pa, ga := compute.HostArena(r.p), compute.HostArena(r.g)
	var pv, gv []compute.Tensor
	for i, s := range specs {
		pv = append(pv, e.View(pa, offsets[i], s.Shape...))
		gv = append(gv, e.View(ga, offsets[i], s.Shape...))
	}
	require.NoError(t, m.Build(e, pv, gv, rows))
	spec := m.Data()
	rnd := rand.New(rand.NewPCG(seed, 5))
	bt := rows * spec.Input[0]
	tok, tgt := make([]int32, bt), make([]int32, bt)
	for i := range tok {
		tok[i], tgt[i] = int32(rnd.IntN(spec.Classes)), int32(rnd.IntN(spec.Classes))
	}
	tgt[1] = -1 // an ignored target
	r.in = models.Inputs{Tokens: e.AllocLabels(bt), Targets: e.AllocLabels(bt)}
	e.SetLabels(r.in.Tokens, tok)
	e.SetLabels(r.in.Targets, tgt)
	r.stats = e.Alloc(3)
	return r
}

func (r *lmRun) loss() float64 {
	r.e.Zero(r.stats)
	r.m.Forward(r.in, 1, r.stats)
	return float64(compute.HostData(r.stats)[0])
}

// The whole model's gradient against central differences of its summed
// loss, with the head untied and tied to the embedding, on every CPU BLAS;
// ready reports parameters down the arena, the embedding last.
func TestLlamaGradients(t *testing.T) {
	for _, tied := range []bool{false, true} {
		cfg := smallLlama
		cfg.TiedEmbeddings = tied
		for name, e := range gradcheck.Engines(t) {
			t.Run(name+map[bool]string{false: "/untied", true: "/tied"}[tied], func(t *testing.T) {
				m, err := models.NewLlama("llama", cfg)
				require.NoError(t, err)
				// Larger than the 0.02 of initialisation, so that every
				// path's gradient is well above float32 rounding; an
				// embedding of scale 0.5, so that the norms' inputs are
				// not small (1/rms large: a loss curved too much for
				// central differences); and the final norm's gain below
				// 1, so that the logits, and the float32 loss's
				// rounding, stay small when the head is the embedding.
				r := newLMRun(t, e, m, 2, 1, 5)
				offsets, _ := models.Layout(m.Params())
				for i, p := range m.Params() {
					s := map[string]float32{"model.embed_tokens.weight": 5, "model.norm.weight": 0.1}[p.Name]
					for j := offsets[i]; s != 0 && j < offsets[i]+p.Size(); j++ {
						r.p[j] *= s
					}
				}
				checkLMGradients(t, m, r.p, r.g, r.loss)
			})
		}
	}
}

// lmText is byte text with structure a small model learns in a few dozen
// steps: short Go functions that differ in a letter and a digit.
func lmText(size int) []byte {
	var sb strings.Builder
	for i := 0; sb.Len() < size; i++ {
		sb.WriteString("func f")
		sb.WriteByte(byte('a' + i%26))
		sb.WriteString("(x int) int { return x * ")
		sb.WriteByte(byte('0' + i%10))
		sb.WriteString(" }\n")
	}
	return []byte(sb.String())
}

// A small Llama trained with AdamW on byte text for 60 steps: the loss on
// the training windows falls well below its start (ln 256 = 5.5 for
// uniform logits), and the replica built from the same seed computes the
// same losses bit for bit.
func TestLlamaLearns(t *testing.T) {
	train := func() []float64 {
		e, err := cpu.New(cpu.Options{Threads: 1})
		require.NoError(t, err)
		cfg := models.LlamaConfig{Layers: 2, Width: 32, Heads: 4, KVHeads: 2, FFNMultiple: 32, Context: 16, Vocab: 256, RopeTheta: 10000}
		m, err := models.NewLlama("llama", cfg)
		require.NoError(t, err)
		const rows, steps = 8, 60
		r := newLMRun(t, e, m, rows, 3, 1)
		text := lmText(16 << 10)
		o, err := optim.New("adamw", optim.Config{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1})
		require.NoError(t, err)
		state := [][]float32{make([]float32, len(r.p)), make([]float32, len(r.p))}
		rnd := rand.New(rand.NewPCG(9, 9))
		tok, tgt := make([]int32, rows*cfg.Context), make([]int32, rows*cfg.Context)
		var losses []float64
		for step := 1; step <= steps; step++ {
			for b := 0; b < rows; b++ {
				at := rnd.IntN(len(text) - cfg.Context - 1)
				for j := 0; j < cfg.Context; j++ {
					tok[b*cfg.Context+j], tgt[b*cfg.Context+j] = int32(text[at+j]), int32(text[at+j+1])
				}
			}
			e.SetLabels(r.in.Tokens, tok)
			e.SetLabels(r.in.Targets, tgt)
			e.Zero(r.stats)
			m.Forward(r.in, 1/float32(len(tok)), r.stats)
			m.Backward(nil)
			losses = append(losses, float64(compute.HostData(r.stats)[0])/float64(len(tok)))
			o.Update(r.p, r.g, state, step, 3e-3)
		}
		return losses
	}
	losses := train()
	first, last := losses[0], losses[len(losses)-1]
	t.Logf("loss %.4f -> %.4f", first, last)
	assert.InDelta(t, math.Log(256), first, 0.1, "the first loss is near uniform's")
	assert.Less(t, last, 0.5*first, "the loss falls")
	assert.Equal(t, losses, train(), "the same seed gives the same losses")
}

// gptGroupsOnly is an engine seen through compute.Engine and the one
// operation group of the GPT's that a Llama asks for before its own
// (the embedding's compute.Indexing): none of a Llama's groups.
type gptGroupsOnly struct {
	compute.Engine
	compute.Indexing
}

// On an engine without a Llama's operation groups, Build fails with one
// line naming the engine and the first operation missing; the CUDA engine
// (emulated), which has them all, builds the model.
func TestLlamaNeedsOperationGroups(t *testing.T) {
	m, err := models.New("llama-tiny", models.Config{Layers: 1})
	require.NoError(t, err)
	e := cudatest.NewEmulated(cuda.Options{})
	pv := deviceViews(e, m)
	err = m.Build(gptGroupsOnly{e, e}, pv, pv, 1)
	var missing *compute.MissingOpError
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, "RMSNorm", missing.Op)
	assert.Equal(t, "RMSNorms", missing.Group)
	assert.Contains(t, err.Error(), "engine cuda")
	assert.NotContains(t, err.Error(), "\n")
	assert.Equal(t, "build model llama-tiny: engine "+e.Name()+" has no RMSNorm (compute.RMSNorms)", err.Error())

	m, err = models.New("llama-tiny", models.Config{Layers: 1})
	require.NoError(t, err)
	pv = deviceViews(e, m)
	require.NoError(t, m.Build(e, pv, pv, models.LlamaTiny.Context), "the CUDA engine has a Llama's groups")
	// In bf16 the report names what the plans run: the Llama's Linear
	// layers have no bias and no GELU, only the residual add in the GEMMs.
	line, warn := m.(models.BuildReporter).BuildReport()
	assert.False(t, warn)
	assert.Contains(t, line, ", cuBLASLt GEMMs with the residual add in their epilogues, ")
	assert.NotContains(t, line, "bias")
	assert.NotContains(t, line, "GELU")
}

// The presets' shapes: parameter counts (Llama 3.2 1B's is 1,235,814,400
// with its tied embedding), SwiGLU widths by Llama's rule, Hugging Face's
// names, weight decay on matrices only, and the Config fields that size
// them.
func TestLlamaPresets(t *testing.T) {
	count := func(name string, cfg models.Config) (*models.Llama, int) {
		m, err := models.New(name, cfg)
		require.NoError(t, err)
		_, n := models.Layout(m.Params())
		return m.(*models.Llama), n
	}
	m, n := count("llama3-1b", models.Config{})
	assert.Equal(t, 1235814400, n)
	assert.Equal(t, 8192, m.Config().FFNHidden)
	assert.Equal(t, models.Llama3_1B.RopeTheta, 500000.0)
	m, n = count("llama-124m", models.Config{})
	assert.Equal(t, 2048, m.Config().FFNHidden)
	assert.Equal(t, 50304*768+12*(768*768*2+2*256*768+3*2048*768+2*768)+768, n)
	m, n = count("llama-tiny", models.Config{})
	assert.Equal(t, 352, m.Config().FFNHidden)
	assert.Equal(t, models.LlamaTiny.Context, m.Data().Input[0])
	assert.Equal(t, 2*256*128+4*(128*128*2+2*64*128+3*352*128+2*128)+128, n, "untied: lm_head has its own weight")

	names := map[string]bool{}
	for _, p := range m.Params() {
		names[p.Name] = true
		assert.Equal(t, len(p.Shape) == 1, p.NoDecay, "%s: decay matrices only", p.Name)
	}
	for _, want := range []string{"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
		"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
		"model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
		"model.layers.0.post_attention_layernorm.weight", "model.layers.3.mlp.gate_proj.weight",
		"model.layers.3.mlp.up_proj.weight", "model.layers.3.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"} {
		assert.True(t, names[want], "no parameter %s", want)
	}

	m, _ = count("llama", models.Config{Layers: 2, Heads: 8, KVHeads: 4, Width: 256, Context: 64, RopeTheta: 500000})
	assert.Equal(t, models.LlamaConfig{Layers: 2, Width: 256, Heads: 8, KVHeads: 4, FFNHidden: 704, FFNMultiple: 32,
		Context: 64, Vocab: 256, RopeTheta: 500000}, m.Config(), "width 256: the SwiGLU width follows it (⌊8·256/3⌋ = 682 → 704)")
	m, _ = count("llama", models.Config{FFNHidden: 100})
	assert.Equal(t, 100, m.Config().FFNHidden)

	for _, c := range []struct {
		name string
		cfg  models.Config
		want string
	}{
		{"llama", models.Config{Heads: 8, KVHeads: 3}, "3 key/value heads do not divide the 8 query heads"},
		{"llama", models.Config{Heads: 8, KVHeads: 8, Width: 8}, "head size 1"},
		{"llama", models.Config{Heads: 5}, "5 heads do not divide the width 128"},
		{"llama", models.Config{RopeTheta: 1000.5}, "rope theta 1000.5"},
		{"llama", models.Config{RopeTheta: math.NaN()}, "rope theta NaN: want a whole number above 1 (0: the preset's)"}, // not the preset's 10000
		{"gpt", models.Config{RopeTheta: math.NaN()}, "rope theta NaN"},
		{"llama", models.Config{Precision: "fp16"}, `precision "fp16": want bf16, fp32 or auto`},
		{"llama", models.Config{KVHeads: -1}, "must not be negative"},
		{"gpt", models.Config{KVHeads: 2}, "no grouped key/value heads"},
		{"gpt-tiny", models.Config{RopeTheta: 1e4}, "no rotary embedding"},
		{"gpt2", models.Config{FFNHidden: 512}, "SwiGLU hidden width 512"},
	} {
		_, err := models.New(c.name, c.cfg)
		require.Error(t, err, "%s %+v", c.name, c.cfg)
		assert.Contains(t, err.Error(), c.want)
		assert.True(t, strings.HasPrefix(err.Error(), "model "+c.name+": "), err.Error())
	}
}

// What the trainer reads of a Llama: FLOPs per token (6N + 6·L·C·T, as the
// GPT's), the activation estimate, and the sizes a checkpoint records,
// which rebuild the same model.
func TestLlamaDescribesItself(t *testing.T) {
	m, err := models.New("llama-tiny", models.Config{})
	require.NoError(t, err)
	l := m.(*models.Llama)
	_, n := models.Layout(m.Params())
	assert.Equal(t, 6*float64(n)+6*4*128*128, l.FLOPsPerToken())
	var flops models.FLOPsCounter = l
	var sizer models.ActivationSizer = l
	assert.Positive(t, flops.FLOPsPerToken())
	// 8 sequences of 128 (R = 1024), C = 128, K = 64, F = 352, H = 4,
	// V = 256: per layer 10RC + 4RK + 6RF + 2R + B·H·T², plus 4RC + R + 2RV.
	r := int64(1024)
	perLayer := 10*r*128 + 4*r*64 + 6*r*352 + 2*r + 8*4*128*128
	assert.Equal(t, 4*(4*perLayer+4*r*128+r+2*r*256), sizer.ActivationBytes(8))
	assert.Equal(t, 2*sizer.ActivationBytes(4), sizer.ActivationBytes(8), "linear in the sequences")
	// in bf16 (bytes): per layer 12RC + 4RK + 6RF + 8R + 4RH, the rotary
	// table 4T·C/H once, the blocks' shared input gradients 2(3RC + 2RK +
	// 3RF), and 8RC + 4R + 2RV
	require.NoError(t, l.SetPrecision(compute.PrecisionBF16))
	assert.Equal(t, int64(4*4022272+16384+3211264+1576960), sizer.ActivationBytes(8))

	d := l.Describe()
	assert.Equal(t, map[string]int{"layers": 4, "heads": 4, "kv_heads": 2, "width": 128, "ffn_hidden": 352,
		"context": 128, "vocab": 256, "rope_theta": 10000, "tied_embeddings": 0}, d)
	back, err := models.LanguageModelOf("llama-tiny", d)
	require.NoError(t, err)
	assert.Equal(t, d, back.(*models.Llama).Describe())
	assert.Equal(t, m.Params(), back.Params())
	g, err := models.New("gpt-tiny", models.Config{})
	require.NoError(t, err)
	back, err = models.LanguageModelOf("gpt-tiny", g.(*models.GPT).Describe())
	require.NoError(t, err)
	assert.Equal(t, models.GPTTiny, back.(*models.GPT).Config())
	delete(d, "ffn_hidden")
	_, err = models.LanguageModelOf("llama-tiny", d)
	assert.ErrorContains(t, err, "ffn_hidden")
	// a checkpoint of a model that does not describe itself (a Decoder of a
	// user's spec): not taken for a GPT, and the error says what to do
	_, err = models.LanguageModelOf("mylm", nil)
	assert.EqualError(t, err, `model "mylm": the checkpoint records no sizes, so it is neither a GPT nor a Llama: `+
		"build it with the factory it was trained with (models.New and the run's settings) and read its weights with ddp.ReadInitWeights")
}

// A sampler of a Llama on the CPU engine draws the same tokens for the
// same seed, the most likely token at temperature 0, and agrees with the
// model built for a batch: its logits at a position are the batch's first
// sequence's.
func TestLlamaSampler(t *testing.T) {
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	cfg := smallLlama
	cfg.Context, cfg.Vocab = 8, 20
	m, err := models.NewLlama("llama", cfg)
	require.NoError(t, err)
	r := newLMRun(t, e, m, 3, 4, 20)
	s, err := models.NewSampler(m, e, r.p)
	require.NoError(t, err)
	prompt := []int32{3, 1, 4}
	out, err := s.Generate(context.Background(), prompt, 12, models.SampleOptions{Temperature: 0.9, TopK: 5, Seed: 2})
	require.NoError(t, err)
	require.Len(t, out, 12, "the window slides past the context of 8")
	again, err := s.Generate(context.Background(), prompt, 12, models.SampleOptions{Temperature: 0.9, TopK: 5, Seed: 2})
	require.NoError(t, err)
	assert.Equal(t, out, again)

	// greedy: the next token is the arg-max of the batch model's logits
	// after the prompt (the first sequence holds the prompt, zeros after)
	tok := make([]int32, 3*cfg.Context)
	copy(tok, prompt)
	e.SetLabels(r.in.Tokens, tok)
	r.loss()
	logits := compute.HostData(m.Logits())[(len(prompt)-1)*cfg.Vocab : len(prompt)*cfg.Vocab]
	best := 0
	for j, v := range logits {
		if v > logits[best] {
			best = j
		}
	}
	greedy, err := s.Generate(context.Background(), prompt, 1, models.SampleOptions{})
	require.NoError(t, err)
	assert.Equal(t, []int32{int32(best)}, greedy)
	_, err = s.Generate(context.Background(), make([]int32, 9), 1, models.SampleOptions{})
	assert.ErrorIs(t, err, models.ErrPromptTooLong)

	// through the interface, as a trainer that knows no model type holds it
	var lm models.LanguageModel = m
	si, err := models.NewSampler(lm, e, r.p)
	require.NoError(t, err)
	viaInterface, err := si.Generate(context.Background(), prompt, 12, models.SampleOptions{Temperature: 0.9, TopK: 5, Seed: 2})
	require.NoError(t, err)
	assert.Equal(t, out, viaInterface)
	_, err = models.NewSampler(lm, e, r.p[1:])
	assert.ErrorContains(t, err, "sampler for llama: ")
}
