package models

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
)

// GPTConfig sizes a GPT-2-style language model.
type GPTConfig struct {
	Layers, Heads, Width int
	// Context is the longest sequence (T); Vocab the number of tokens.
	Context, Vocab int
}

// GPT presets: the registry's "gpt-tiny" (a byte-level model that trains on
// a laptop's CPU) and the GPT-2 family, "gpt2" (124M), "gpt2-medium"
// (350M), "gpt2-large" (774M) and "gpt2-xl" (1.5B), with OpenAI's sizes,
// a context of 1024 and GPT-2's vocabulary of GPT2Tokens padded to 50304,
// a multiple of 64, as GPUs prefer. "gpt" is gpt-tiny's shape, meant to be
// sized with Config's fields. Config.Vocab replaces any preset's
// vocabulary, for tokens of another tokenizer.
var (
	GPTTiny    = GPTConfig{Layers: 4, Heads: 4, Width: 128, Context: 128, Vocab: 256}
	GPT2       = GPTConfig{Layers: 12, Heads: 12, Width: 768, Context: 1024, Vocab: 50304}
	GPT2Medium = GPTConfig{Layers: 24, Heads: 16, Width: 1024, Context: 1024, Vocab: 50304}
	GPT2Large  = GPTConfig{Layers: 36, Heads: 20, Width: 1280, Context: 1024, Vocab: 50304}
	GPT2XL     = GPTConfig{Layers: 48, Heads: 25, Width: 1600, Context: 1024, Vocab: 50304}
)

// GPT2Tokens is the number of tokens of GPT-2's tokenizer; the gpt2 presets
// pad it to GPT2.Vocab rows, and ids GPT2Tokens and above never occur.
const GPT2Tokens = 50257

func init() {
	presets := map[string]GPTConfig{"gpt": GPTTiny, "gpt-tiny": GPTTiny,
		"gpt2": GPT2, "gpt2-medium": GPT2Medium, "gpt2-large": GPT2Large, "gpt2-xl": GPT2XL}
	for name, preset := range presets {
		registerBuiltIn(name, func(cfg Config) (Model, error) {
			if err := noLlamaSettings(cfg); err != nil {
				return nil, err
			}
			g := preset
			for _, o := range []struct {
				dst *int
				v   int
			}{
				{&g.Layers, cfg.Layers}, {&g.Heads, cfg.Heads}, {&g.Width, cfg.Width},
				{&g.Context, cfg.Context}, {&g.Vocab, cfg.Vocab},
			} {
				if o.v > 0 {
					*o.dst = o.v
				}
			}
			m, err := NewGPT(name, g)
			if err != nil {
				return nil, err
			}
			if err := m.SetRecompute(cfg.Recompute); err != nil {
				return nil, err
			}
			return m, m.SetPrecision(cfg.Precision)
		})
	}
}

// noLlamaSettings refuses a Config that sets what only a Llama has.
func noLlamaSettings(cfg Config) error {
	switch {
	case cfg.KVHeads > 0:
		return fmt.Errorf("key/value heads %d: a GPT's attention has no grouped key/value heads (llama has)", cfg.KVHeads)
	case cfg.RopeTheta > 0:
		return fmt.Errorf("rope theta %g: a GPT has learnt positions, no rotary embedding (llama has)", cfg.RopeTheta)
	case cfg.FFNHidden > 0:
		return fmt.Errorf("SwiGLU hidden width %d: a GPT's MLP is 4x its width (llama's is sized)", cfg.FFNHidden)
	}
	return nil
}

// Validate checks that the sizes fit together.
func (g GPTConfig) Validate() error {
	switch {
	case g.Layers < 1 || g.Heads < 1 || g.Width < 1 || g.Context < 1 || g.Vocab < 2:
		return fmt.Errorf("layers %d, heads %d, width %d, context %d, vocabulary %d: need at least 1 layer, head, width and position and 2 tokens",
			g.Layers, g.Heads, g.Width, g.Context, g.Vocab)
	case g.Width%g.Heads != 0:
		return fmt.Errorf("%d heads do not divide the width %d: pick a width that is a multiple of the heads", g.Heads, g.Width)
	}
	return nil
}

// GPT is a GPT-2-style decoder-only transformer language model: token and
// position embeddings, Layers pre-LayerNorm blocks (x + attn(ln_1(x)), then
// x + mlp(ln_2(x)) with a 4x GELU MLP), a final LayerNorm and an output head
// tied to the token embedding; its loss is the cross-entropy of the next
// token at every position (targets -1 ignored). It is a Decoder of GPT-2's
// spec (GPTConfig.DecoderSpec): its layers run in bf16 on an engine that
// computes in bf16 (compute.BF16Tensors, the CUDA engine) at the shapes
// its kernels take, in fp32 elsewhere (Decoder.SetPrecision).
//
// Parameters are named as GPT-2's checkpoints name them (wte, wpe,
// h.0.ln_1.weight, h.0.attn.c_attn.weight, ..., ln_f.bias); see
// docs/GPT.md for how they map onto other tools' tensors. Initialisation
// is GPT-2's: N(0, 0.02) for weights and embeddings, residual output
// projections (attn.c_proj, mlp.c_proj) scaled by 1/sqrt(2·Layers), zero
// biases, unit norm gains. Biases, norm parameters and the position table
// are exempt from weight decay (ParamSpec.NoDecay). SetRecompute trades
// the activations' memory for arithmetic: RecomputeBlock in fp32 and
// bf16, RecomputeGELU in fp32 only (an engine that would run the model in
// bf16 fails the build, saying to use block or fp32).
type GPT struct {
	*Decoder
	cfg GPTConfig
}

var (
	_ Model           = (*GPT)(nil)
	_ Recomputer      = (*GPT)(nil)
	_ ActivationSizer = (*GPT)(nil)
)

// NewGPT returns a GPT of the given sizes.
func NewGPT(name string, g GPTConfig) (*GPT, error) {
	if err := g.Validate(); err != nil {
		return nil, err // models.New names the model
	}
	d, err := NewDecoder(name, g.DecoderSpec())
	if err != nil {
		return nil, err
	}
	return &GPT{Decoder: d, cfg: g}, nil
}

// DecoderSpec is GPT-2 as a decoder: wte and wpe, per layer
// x + c_proj(attn(c_attn(ln_1(x)))) and x + mlp(ln_2(x)), ln_f, and
// lm_head tied to wte; every 1-D parameter exempt from weight decay.
func (g GPTConfig) DecoderSpec() DecoderSpec {
	c := g.Width
	proj := 0.02 / math.Sqrt(2*float64(g.Layers))
	linear := func(name string, in, out int, std float64) *Linear {
		l := NewLinear(name, in, out, compute.Identity)
		l.WeightInit, l.WeightStd = Normal, std
		return l
	}
	return DecoderSpec{
		Vocab: g.Vocab, Context: g.Context, Width: c, Layers: g.Layers,
		Embedding: "wte", EmbeddingStd: 0.02, Positions: "wpe", PositionStd: 0.02,
		LayerPrefix: "h", HiddenRecompute: true,
		Block: func(i int, hidden *ScratchPool) []Layer {
			h := fmt.Sprintf("h.%d.", i)
			mlp := NewGELUMLP(h+"mlp", c, 4*c, 0.02, proj)
			mlp.SharedHidden = hidden
			return []Layer{
				NewResidual(h+"attn",
					NewLayerNorm(h+"ln_1", c),
					linear(h+"attn.c_attn", c, 3*c, 0.02),
					NewCausalSelfAttention(h+"attn", g.Context, c, g.Heads),
					linear(h+"attn.c_proj", c, c, proj)),
				NewResidual(h+"mlp", NewLayerNorm(h+"ln_2", c), mlp),
			}
		},
		Norm:           func() Layer { return NewLayerNorm("ln_f", c) },
		Head:           "lm_head",
		TiedHead:       true,
		NoDecayVectors: true,
		AtContext: func(t int) DecoderSpec {
			h := g
			h.Context = t
			return h.DecoderSpec()
		},
	}
}

// Config is the model's sizes.
func (m *GPT) Config() GPTConfig { return m.cfg }

// ActivationBytes is what a build for seqs sequences allocates for its
// activations, in bytes, in m's recompute mode (docs/GPT.md's tables):
// in bf16 when the model runs in bf16 (Precision after a Build that chose
// it, or set to bf16 before; activationBytesBF16), else in fp32 on the CPU
// engine. In fp32, with R = B·T rows, one layer keeps
// 26·R·C + 4·R + B·H·T² floats (the probabilities B·H·T² in attention's
// plan), and the model 4·R·C + 3·R + 2·R·V besides (the embeddings and
// positions, ln_f, the head's input gradient, the logits and their
// gradient). RecomputeGELU keeps one GELU output (R,4C) for all layers
// instead of one each; RecomputeBlock keeps one layer's activations for
// all, each layer's output (R,C) and the layers' alternating input
// gradients (two of R·C). Not counted: attention's scratch of 64 rows of T
// per plan.
func (m *GPT) ActivationBytes(seqs int) int64 {
	if m.Precision() == compute.PrecisionBF16 {
		return m.activationBytesBF16(seqs)
	}
	g := m.cfg
	b, t, c, h, v := int64(seqs), int64(g.Context), int64(g.Width), int64(g.Heads), int64(g.Vocab)
	r, layers := b*t, int64(g.Layers)
	layer := 26*r*c + 4*r + b*h*t*t
	var n int64
	switch m.Recompute() {
	case RecomputeGELU:
		n = layers*(layer-4*r*c) + 4*r*c
	case RecomputeBlock:
		n = layers*r*c + layer + min(layers, 2)*r*c
	default:
		n = layers * layer
	}
	return 4 * (n + 4*r*c + 3*r + 2*r*v)
}

// activationBytesBF16 is ActivationBytes of a bf16 build, which the CUDA
// engine's pool hands out (TestRecomputeActivationBytesBF16). With R = B·T
// rows, one layer keeps 32·R·C + 16·R + 4·R·H bytes: bf16 outputs of ln_1
// and ln_2 (R,C), c_attn (R,3C), attention and both c_proj (R,C), c_fc
// (R,4C) and its pre-activation (R,4C), the norms' fp32 mean and rstd (R),
// attention's fp32 log-sum-exp (B,H,T). The blocks share their input
// gradients, 18·R·C bytes for all layers: two (R,C), one (R,3C), one
// (R,4C). The model keeps 8·R·C + 12·R + 2·R·V besides: the embeddings,
// ln_f's output, input gradient and statistics, the head's input gradient,
// the logits (R,V), which the loss overwrites with their gradient, and its
// fp32 losses (R). RecomputeBlock keeps each layer's output, the residual
// stream (2·R·C), and one layer's activations less that for all; in bf16
// RecomputeGELU has no form (the build refuses it), so its figure is
// none's. Not counted: the bf16 copy of the weights (2 bytes a
// parameter), the GEMM workspace and the kernels' scratch, which are the
// engine's and do not grow with the layers.
func (m *GPT) activationBytesBF16(seqs int) int64 {
	g := m.cfg
	b, t, c, h, v := int64(seqs), int64(g.Context), int64(g.Width), int64(g.Heads), int64(g.Vocab)
	r, layers := b*t, int64(g.Layers)
	layer := 32*r*c + 16*r + 4*r*h
	n := layers * layer
	if m.Recompute() == RecomputeBlock {
		n = layers*2*r*c + layer - 2*r*c
	}
	return n + 18*r*c + 8*r*c + 12*r + 2*r*v
}
