package models

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
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
		Register(name, func(cfg Config) (Model, error) {
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
			if cfg.Precision == compute.PrecisionBF16 {
				return nil, fmt.Errorf("precision bf16: a Llama computes in fp32 on the engine's operation groups (no fused bf16 kernels yet)")
			}
			if cfg.Precision != compute.PrecisionAuto && cfg.Precision != compute.PrecisionF32 {
				return nil, fmt.Errorf("precision %q: want fp32 or auto", string(cfg.Precision))
			}
			m, err := NewLlama(name, l)
			if err != nil {
				return nil, err
			}
			return m, m.SetRecompute(cfg.Recompute)
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
// position (targets -1 ignored).
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
	name string
	cfg  LlamaConfig

	blocks    []Layer // the residual blocks, two per layer; one checkpoint per layer with RecomputeBlock
	recompute Recompute
	norm      *RMSNorm
	head      *Linear
	first     []int // first owned parameter index of blocks[i]
	norm0     int   // parameter index of model.norm.weight
	rows      int   // sequences per micro-batch (Build's)

	e               compute.Engine
	idx             compute.Indexing
	embed, dembed   compute.Tensor // (V,C)
	addEmbed        bool           // the embedding's gradient adds to the tied head's
	x0              compute.Tensor // (B·T, C) embeddings
	tokens          compute.Labels // the last Forward's
	logits, dlogits compute.Tensor // (B·T, V)
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
	m := &Llama{name: name, cfg: l, recompute: RecomputeNone}
	m.blocks = m.makeBlocks()
	m.norm = NewRMSNorm("model.norm", l.Width, l.Eps())
	m.head = normalLinear("lm_head", l.Width, l.Vocab, 0.02)
	if l.TiedEmbeddings {
		m.head.TiedWeight = embedName
	}
	return m, nil
}

// makeBlocks composes the layers' blocks for m's recompute mode: per
// layer x + attn(rmsnorm(x)) and x + swiglu(rmsnorm(x)), both in one
// checkpoint with RecomputeBlock, every MLP's silu(gate)·up in one shared
// buffer with RecomputeGELU.
func (m *Llama) makeBlocks() []Layer {
	l := m.cfg
	c, eps := l.Width, l.Eps()
	const std = 0.02
	out := std / math.Sqrt(2*float64(l.Layers))
	pool, hidden := recomputePools(m.recompute)
	var blocks []Layer
	for i := 0; i < l.Layers; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		mlp := NewSwiGLUMLP(p+"mlp", c, l.FFNHidden, std, out)
		mlp.SharedHidden = hidden
		attn := NewResidual(p+"self_attn",
			NewRMSNorm(p+"input_layernorm", c, eps),
			NewGroupedSelfAttention(p+"self_attn", l.Context, c, l.Heads, l.KVHeads, l.RopeTheta, std, out))
		ffn := NewResidual(p+"mlp", NewRMSNorm(p+"post_attention_layernorm", c, eps), mlp)
		if pool != nil {
			blocks = append(blocks, NewCheckpoint(fmt.Sprintf("model.layers.%d", i), pool, attn, ffn))
		} else {
			blocks = append(blocks, attn, ffn)
		}
	}
	return blocks
}

// SetRecompute chooses which activations the model recomputes in backward
// (before Build): RecomputeNone (or ""), RecomputeGELU (SwiGLU's output,
// silu(gate)·up) or RecomputeBlock.
func (m *Llama) SetRecompute(r Recompute) error {
	r, err := ParseRecompute(string(r))
	if err != nil {
		return err
	}
	if m.e != nil {
		return fmt.Errorf("recompute %s: the model is built already", r)
	}
	m.recompute = r
	m.blocks = m.makeBlocks()
	return nil
}

// Recompute is the mode SetRecompute chose.
func (m *Llama) Recompute() Recompute { return m.recompute }

// Name is the registry name.
func (m *Llama) Name() string { return m.name }

// Config is the model's sizes, FFNHidden resolved.
func (m *Llama) Config() LlamaConfig { return m.cfg }

// Precision is fp32: a Llama runs on the engine's fp32 operation groups.
func (m *Llama) Precision() compute.Precision { return compute.PrecisionF32 }

// declared is every layer's parameters in forward order, tied uses
// included: embedding, blocks, norm, head.
func (m *Llama) declared() [][]ParamSpec {
	d := [][]ParamSpec{{{Name: embedName, Shape: []int{m.cfg.Vocab, m.cfg.Width}, Init: Normal, Std: 0.02}}}
	for _, b := range m.blocks {
		d = append(d, b.Params())
	}
	return append(d, m.norm.Params(), m.head.Params())
}

// Params lists the embedding, each block's parameters, the final norm's
// and the head's (none when it is tied to the embedding).
func (m *Llama) Params() []ParamSpec { return owned(m.declared()) }

// Data is windows of Context token ids with a next-token target at every
// position, over Vocab tokens.
func (m *Llama) Data() datasets.Spec {
	return datasets.Spec{Input: []int{m.cfg.Context}, Tokens: true, Targets: m.cfg.Context, Classes: m.cfg.Vocab}
}

// Build binds the views, asks the engine for the operation groups the
// layers need and allocates the activations of rows sequences.
func (m *Llama) Build(e compute.Engine, params, grads []compute.Tensor, rows int) error {
	if err := m.build(e, params, grads, rows); err != nil {
		return fmt.Errorf("build model %s: %w", m.name, err)
	}
	return nil
}

func (m *Llama) build(e compute.Engine, params, grads []compute.Tensor, rows int) error {
	if rows <= 0 {
		return fmt.Errorf("%d sequences", rows)
	}
	if m.e != nil {
		return fmt.Errorf("built twice")
	}
	specs := m.Params()
	if len(params) != len(specs) || len(grads) != len(specs) {
		return fmt.Errorf("got %d parameter and %d gradient views, want %d of each", len(params), len(grads), len(specs))
	}
	idx, err := compute.Require[compute.Indexing](e, "embedding lookup")
	if err != nil {
		return err
	}
	if err := requireLlamaOps(e); err != nil {
		return err
	}
	declared := m.declared()
	uses, err := resolveTies(declared)
	if err != nil {
		return err
	}
	l, bt := m.cfg, rows*m.cfg.Context
	layers := append(append([]Layer(nil), m.blocks...), m.norm, m.head)
	m.first = make([]int, len(layers))
	next := 1 // after the embedding
	for i, ly := range layers {
		b, n := layerBuild(Build{Engine: e, Batch: bt, In: []int{l.Width}, NeedInputGrad: true}, declared[i+1], uses[i+1], params, grads)
		m.first[i], next = next, next+n
		if _, err := ly.Build(b); err != nil {
			return err
		}
	}
	m.norm0 = m.first[len(m.blocks)]
	m.e, m.idx, m.rows = e, idx, rows
	m.embed, m.dembed, m.addEmbed = params[0], grads[0], uses[0][0].add
	m.x0 = e.Alloc(bt, l.Width)
	m.dlogits = e.Alloc(bt, l.Vocab)
	return nil
}

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

// Forward embeds in.Tokens (B·T), runs the blocks, the final norm and the
// head, and the cross-entropy of the logits (B·T, V) against in.Targets.
func (m *Llama) Forward(in Inputs, scale float32, stats compute.Tensor) {
	m.logits = m.forwardLogits(in.Tokens)
	m.e.SoftmaxCrossEntropy(m.logits, in.Targets, m.dlogits, scale, stats)
}

// forwardLogits runs the model up to the logits (B·T, V).
func (m *Llama) forwardLogits(tokens compute.Labels) compute.Tensor {
	m.tokens = tokens
	m.idx.GatherRows(m.x0, m.embed, tokens, false) // x0 (B·T,C) = embed_tokens[tokens]
	h := m.x0
	for _, b := range m.blocks {
		h = b.Forward(h)
	}
	return m.head.Forward(m.norm.Forward(h))
}

// Logits is the last Forward's logits (B·T, V): row b·T+t scores the token
// after position t of sequence b.
func (m *Llama) Logits() compute.Tensor { return m.logits }

// Backward propagates the loss's gradient from the head to the embedding,
// calling ready as the head and final norm, each block and finally the
// embedding finish.
func (m *Llama) Backward(ready func(firstParam int)) {
	d := m.norm.Backward(m.head.Backward(m.dlogits))
	if ready != nil {
		ready(m.norm0) // model.norm and, when untied, lm_head after it
	}
	for i := len(m.blocks) - 1; i >= 0; i-- {
		d = m.blocks[i].Backward(d)
		if ready != nil {
			ready(m.first[i])
		}
	}
	if !m.addEmbed {
		m.e.Zero(m.dembed)
	}
	m.idx.ScatterAddRows(m.dembed, d, m.tokens)
	if ready != nil {
		ready(0)
	}
}

// FLOPsPerToken is the arithmetic of training on one token, counted as
// the GPT's is (docs/GPT.md, MFU): 6 per parameter, each counted once (a
// tied head is not counted again; the embedding is counted as if it were a
// GEMM's weight), plus attention's QKᵀ and PV under the causal mask,
// 6·Layers·Width·Context (the query heads' width; key/value heads that
// groups share do not change these products).
func (m *Llama) FLOPsPerToken() float64 {
	n := 0
	for _, p := range m.Params() {
		n += p.Size()
	}
	l := m.cfg
	return 6*float64(n) + 6*float64(l.Layers)*float64(l.Width)*float64(l.Context)
}

// ActivationBytes is what a build for seqs sequences allocates for its
// activations on the CPU engine, in bytes, in m's recompute mode
// (docs/LLAMA.md's table): per layer 20·R·C + 5·R·K + 5·R·F + 2·R +
// B·H·T² floats with R = B·T rows, K the key/value width
// KVHeads·C/Heads and F SwiGLU's hidden width; plus 4·R·C + R for the
// embedding, the final norm and the head's input gradient, and 2·R·V for
// the logits and their gradient. RecomputeGELU keeps one silu(gate)·up
// (R,F) for all layers instead of one each; RecomputeBlock keeps one
// layer's activations for all, each layer's output (R,C) and the layers'
// alternating input gradients (two of R·C). Not counted: the rotary
// tables (T·C/Heads per plan) and attention's scratch.
func (m *Llama) ActivationBytes(seqs int) int64 {
	l := m.cfg
	b, t, c, h := int64(seqs), int64(l.Context), int64(l.Width), int64(l.Heads)
	k, f, v := int64(l.KVHeads)*c/h, int64(l.FFNHidden), int64(l.Vocab)
	r, layers := b*t, int64(l.Layers)
	layer := 20*r*c + 5*r*k + 5*r*f + 2*r + b*h*t*t
	var n int64
	switch m.recompute {
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
