package models

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
)

// LlamaConfig sizes a Llama-style language model.
type LlamaConfig struct {
	Layers, Width int
	// Heads query heads and KVHeads key/value heads (grouped-query
	// attention: Heads a multiple of KVHeads) of Width/Heads channels.
	Heads, KVHeads int
	// FFNHidden is SwiGLU's hidden width; 0 means Llama's rule (FFN).
	FFNHidden int
	// FFNMultiple and FFNMultiplier are the rule's rounding (Meta's
	// multiple_of; 0 means 256) and scale (Llama 3's ffn_dim_multiplier;
	// 0 means 1).
	FFNMultiple   int
	FFNMultiplier float64
	// Context is the longest sequence (T); Vocab the number of tokens.
	Context, Vocab int
	// RopeTheta is the rotary embedding's base (a whole number).
	RopeTheta float64
	// NormEps is the RMSNorms' epsilon (1e-5 when 0).
	NormEps float32
	// TiedEmbeddings makes the output head's weight the token embedding's
	// (lm_head = embed_tokens), as Llama 3.2 1B has it.
	TiedEmbeddings bool
}

// Llama presets: the registry's "llama-tiny" (a byte-level model that
// trains on a laptop's CPU, gpt-tiny's size), "llama-124m" (GPT-2 124M's
// depth, width, context and padded vocabulary with 4 key/value heads) and
// "llama3-1b" (Llama 3.2 1B's shape). "llama" is llama-tiny's shape, meant
// to be sized with Config's fields.
var (
	LlamaTiny = LlamaConfig{Layers: 4, Width: 128, Heads: 4, KVHeads: 2, FFNMultiple: 32,
		Context: 128, Vocab: 256, RopeTheta: 10000}
	Llama124M = LlamaConfig{Layers: 12, Width: 768, Heads: 12, KVHeads: 4,
		Context: 1024, Vocab: 50304, RopeTheta: 10000, TiedEmbeddings: true}
	Llama3_1B = LlamaConfig{Layers: 16, Width: 2048, Heads: 32, KVHeads: 8, FFNMultiplier: 1.5,
		Context: 2048, Vocab: 128256, RopeTheta: 500000, TiedEmbeddings: true}
)

func init() {
	for name, preset := range map[string]LlamaConfig{"llama": LlamaTiny, "llama-tiny": LlamaTiny, "llama-124m": Llama124M, "llama3-1b": Llama3_1B} {
		registerBuiltIn(name, func(cfg Config) (Model, error) {
			l := preset
			for _, o := range []struct {
				dst *int
				v   int
			}{
				{&l.Layers, cfg.Layers}, {&l.Heads, cfg.Heads}, {&l.KVHeads, cfg.KVHeads}, {&l.Width, cfg.Width},
				{&l.FFNHidden, cfg.FFNHidden}, {&l.Context, cfg.Context}, {&l.Vocab, cfg.Vocab},
			} {
				if o.v > 0 {
					*o.dst = o.v
				}
			}
			if cfg.RopeTheta > 0 {
				l.RopeTheta = cfg.RopeTheta
			}
			m, err := NewLlama(name, l)
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

// FFN is SwiGLU's hidden width: FFNHidden when set, else Meta's rule:
// ⌊2·4·Width/3⌋, times FFNMultiplier (truncated), rounded up to a multiple
// of FFNMultiple. Width 768 gives 2048; Llama 3.2 1B's 2048 with
// multiplier 1.5 gives 8192; llama-tiny's 128 with multiple 32 gives 352.
func (l LlamaConfig) FFN() int {
	if l.FFNHidden > 0 {
		return l.FFNHidden
	}
	h := 8 * l.Width / 3
	if l.FFNMultiplier > 0 {
		h = int(l.FFNMultiplier * float64(h))
	}
	m := l.FFNMultiple
	if m <= 0 {
		m = 256
	}
	return (h + m - 1) / m * m
}

// Eps is the RMSNorms' epsilon: NormEps, or 1e-5 when it is 0.
func (l LlamaConfig) Eps() float32 {
	if l.NormEps > 0 {
		return l.NormEps
	}
	return 1e-5
}

// Validate checks that the sizes fit together.
func (l LlamaConfig) Validate() error {
	switch {
	case l.Layers < 1 || l.Heads < 1 || l.KVHeads < 1 || l.Width < 1 || l.Context < 1 || l.Vocab < 2:
		return fmt.Errorf("layers %d, heads %d, key/value heads %d, width %d, context %d, vocabulary %d: need at least 1 layer, head, key/value head, width and position and 2 tokens",
			l.Layers, l.Heads, l.KVHeads, l.Width, l.Context, l.Vocab)
	case l.Width%l.Heads != 0:
		return fmt.Errorf("%d heads do not divide the width %d: pick a width that is a multiple of the heads", l.Heads, l.Width)
	case l.Heads%l.KVHeads != 0:
		return fmt.Errorf("%d key/value heads do not divide the %d query heads: pick a number of heads that is a multiple of the key/value heads", l.KVHeads, l.Heads)
	case (l.Width/l.Heads)%2 != 0:
		return fmt.Errorf("head size %d (width %d over %d heads) is odd: the rotary embedding turns pairs of channels", l.Width/l.Heads, l.Width, l.Heads)
	case !(l.RopeTheta > 1) || l.RopeTheta != math.Trunc(l.RopeTheta) || l.RopeTheta > math.MaxInt32:
		return fmt.Errorf("rope theta %g: want a whole number above 1 (Llama 2: 10000, Llama 3: 500000)", l.RopeTheta)
	case l.FFN() < 1:
		return fmt.Errorf("SwiGLU hidden width %d", l.FFN())
	}
	return nil
}

// Llama is a Llama-style decoder-only transformer language model: a token
// embedding, Layers pre-norm blocks (x + attn(rmsnorm(x)), then
// x + swiglu(rmsnorm(x))), a final RMSNorm and an output head; attention
// has grouped key/value heads and rotary position embedding, no layer has
// a bias. Its loss is the cross-entropy of the next token at every
// position (targets -1 ignored). It is a Decoder of Llama's spec
// (LlamaConfig.DecoderSpec); RecomputeGELU recomputes SwiGLU's output,
// silu(gate)·up. On an engine with a bf16 form of every layer (the CUDA
// engine) it runs in bf16 through the layers' plans, as the GPT does
// (Decoder.SetPrecision).
//
// Parameters are named as Hugging Face's LlamaForCausalLM names them
// (model.embed_tokens.weight, model.layers.0.input_layernorm.weight,
// model.layers.0.self_attn.q_proj.weight, ..., model.norm.weight,
// lm_head.weight); see docs/LLAMA.md. Initialisation: N(0, 0.02) for the
// embedding and the projections, o_proj and down_proj N(0, 0.02/√(2·Layers))
// as GPT-2 scales its residual outputs, unit norm gains. The norms' gains
// are exempt from weight decay; every matrix (embedding and head included)
// is decayed.
type Llama struct {
	*Decoder
	cfg LlamaConfig
}

var (
	_ Model           = (*Llama)(nil)
	_ FLOPsCounter    = (*Llama)(nil)
	_ ActivationSizer = (*Llama)(nil)
	_ Recomputer      = (*Llama)(nil)
)

// embedName is the token embedding's parameter name.
const embedName = "model.embed_tokens.weight"

// NewLlama returns a Llama of the given sizes.
func NewLlama(name string, l LlamaConfig) (*Llama, error) {
	if err := l.Validate(); err != nil {
		return nil, err // models.New names the model
	}
	l.FFNHidden = l.FFN()
	d, err := NewDecoder(name, l.DecoderSpec())
	if err != nil {
		return nil, err
	}
	return &Llama{Decoder: d, cfg: l}, nil
}

// DecoderSpec is Llama as a decoder: model.embed_tokens, per layer
// x + self_attn(input_layernorm(x)) and x + mlp(post_attention_layernorm(x))
// with SwiGLU's hidden width FFN(), model.norm, and lm_head (tied to the
// embedding with TiedEmbeddings).
func (l LlamaConfig) DecoderSpec() DecoderSpec {
	c, eps, ffn := l.Width, l.Eps(), l.FFN()
	const std = 0.02
	out := std / math.Sqrt(2*float64(l.Layers))
	return DecoderSpec{
		Vocab: l.Vocab, Context: l.Context, Width: c, Layers: l.Layers,
		Embedding: embedName, EmbeddingStd: std,
		LayerPrefix: "model.layers", HiddenRecompute: true,
		Block: func(i int, hidden *ScratchPool) []Layer {
			p := fmt.Sprintf("model.layers.%d.", i)
			mlp := NewSwiGLUMLP(p+"mlp", c, ffn, std, out)
			mlp.SharedHidden = hidden
			return []Layer{
				NewResidual(p+"self_attn",
					NewRMSNorm(p+"input_layernorm", c, eps),
					NewGroupedSelfAttention(p+"self_attn", l.Context, c, l.Heads, l.KVHeads, l.RopeTheta, std, out)),
				NewResidual(p+"mlp", NewRMSNorm(p+"post_attention_layernorm", c, eps), mlp),
			}
		},
		Norm:     func() Layer { return NewRMSNorm("model.norm", c, eps) },
		Head:     "lm_head",
		TiedHead: l.TiedEmbeddings,
		HeadStd:  std,
		Require:  requireLlamaOps,
		AtContext: func(t int) DecoderSpec {
			m := l
			m.Context = t
			return m.DecoderSpec()
		},
	}
}

// Config is the model's sizes, FFNHidden resolved.
func (m *Llama) Config() LlamaConfig { return m.cfg }

// requireLlamaOps asks e for a Llama block's operation groups, so that an
// engine without one fails the build naming the operation and not the
// first layer that needs it.
func requireLlamaOps(e compute.Engine) error {
	for _, err := range []error{
		require[compute.RMSNorms](e, "RMSNorm"),
		require[compute.Rotary](e, "rotary embedding"),
		require[compute.GroupedAttention](e, "grouped-query attention"),
		require[compute.SwiGLUs](e, "SwiGLU"),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// require is compute.Require's error alone.
func require[G any](e compute.Engine, op string) error {
	_, err := compute.Require[G](e, op)
	return err
}

// ActivationBytes is what a build for seqs sequences allocates for its
// activations on the CPU engine, in bytes, in m's recompute mode
// (docs/LLAMA.md's table): per layer 10·R·C + 4·R·K + 6·R·F + 2·R +
// B·H·T² floats with R = B·T rows, K the key/value width
// KVHeads·C/Heads and F SwiGLU's hidden width; plus 4·R·C + R for the
// embedding, the final norm and the head's input gradient, and 2·R·V for
// the logits and their gradient. RecomputeGELU keeps one silu(gate)·up
// (R,F) for all layers instead of one each; RecomputeBlock keeps one
// layer's activations for all, each layer's output (R,C) and the layers'
// alternating input gradients (two of R·C). Not counted: the rotary
// tables (T·C/Heads per plan) and attention's scratch.
//
// At precision bf16 (SetPrecision before Build) it is what the bf16 build
// allocates (docs/LLAMA.md): per layer 12·R·C + 4·R·K + 6·R·F + 8·R + 4·R·H
// bytes (bf16 activations, fp32 rstd and attention's log-sum-exp, no
// probabilities); the rotary plan's fp32 table, 4·T·C/H, once (the layers'
// plans are one, the engine's for the spec); the blocks'
// shared input gradients once, 2·(3·R·C + 2·R·K + 3·R·F), and 8·R·C + 4·R
// + 2·R·V for the embedding, the final norm and the head (the logits bf16,
// their gradient written over them). RecomputeBlock keeps each layer's
// output, the residual stream (2·R·C), and one layer's activations less
// that for all (TestRecomputeActivationBytesBF16 measures both against the
// emulated engine's allocations).
func (m *Llama) ActivationBytes(seqs int) int64 {
	l := m.cfg
	b, t, c, h := int64(seqs), int64(l.Context), int64(l.Width), int64(l.Heads)
	k, f, v := int64(l.KVHeads)*c/h, int64(l.FFNHidden), int64(l.Vocab)
	r, layers := b*t, int64(l.Layers)
	if m.Precision() == compute.PrecisionBF16 {
		// the rotary plan, one for all layers, holds the cos and sin table,
		// fp32 (T, C/H/2) each
		table := 4 * t * (c / h)
		layer := 12*r*c + 4*r*k + 6*r*f + 8*r + 4*r*h
		n := layers * layer
		if m.Recompute() == RecomputeBlock { // each layer's output stream, and one layer's activations less it
			n = layers*2*r*c + layer - 2*r*c
		}
		return n + table + 2*(3*r*c+2*r*k+3*r*f) + 8*r*c + 4*r + 2*r*v
	}
	layer := 10*r*c + 4*r*k + 6*r*f + 2*r + b*h*t*t
	var n int64
	switch m.Recompute() {
	case RecomputeGELU:
		n = layers*(layer-r*f) + r*f
	case RecomputeBlock:
		n = layers*r*c + layer + min(layers, 2)*r*c
	default:
		n = layers * layer
	}
	return 4 * (n + 4*r*c + r + 2*r*v)
}

// Describe gives the model's sizes (ddp.ModelDescriber), so that a
// checkpoint records what its tensors' shapes do not show (the heads, the
// rotary base, the tie).
func (m *Llama) Describe() map[string]int {
	l := m.cfg
	tied := 0
	if l.TiedEmbeddings {
		tied = 1
	}
	return map[string]int{"layers": l.Layers, "heads": l.Heads, "kv_heads": l.KVHeads, "width": l.Width,
		"ffn_hidden": l.FFNHidden, "context": l.Context, "vocab": l.Vocab, "rope_theta": int(l.RopeTheta),
		"tied_embeddings": tied}
}

// LlamaConfigOf reads a LlamaConfig back from Describe's map.
func LlamaConfigOf(d map[string]int) (LlamaConfig, error) {
	l := LlamaConfig{Layers: d["layers"], Heads: d["heads"], KVHeads: d["kv_heads"], Width: d["width"],
		FFNHidden: d["ffn_hidden"], Context: d["context"], Vocab: d["vocab"], RopeTheta: float64(d["rope_theta"]),
		TiedEmbeddings: d["tied_embeddings"] != 0}
	if l.FFNHidden < 1 {
		return LlamaConfig{}, fmt.Errorf("model description without a SwiGLU hidden width (ffn_hidden %d)", l.FFNHidden)
	}
	return l, l.Validate()
}
