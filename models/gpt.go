package models

import (
	"errors"
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
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
		Register(name, func(cfg Config) (Model, error) {
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

// FLOPsPerToken is the arithmetic of training on one token, counted once
// (the head tied to wte is not counted again): 6 per parameter (a
// multiply-add in the forward, two in the backward; the embeddings counted
// as if they were GEMM weights, as PaLM's appendix and nanoGPT count them),
// plus, per layer, attention's two products over the context, QKᵀ and PV:
// 2·2·C·T forward for a full context, three times that with the backward,
// 12·L·C·T, half of it under the causal mask: 6·L·C·T. (nanoGPT's
// estimate_mfu counts the full 12·L·C·T.) The PyTorch peer,
// bench/torch_gpt_bench.py, counts the same. GPT-2 124M (N = 124,475,904
// with the vocabulary padded to 50304, L = 12, C = 768, T = 1024):
// 6N + 6LCT = 803,478,528 FLOPs per token.
func (m *GPT) FLOPsPerToken() float64 {
	n := 0
	for _, p := range m.Params() {
		n += p.Size()
	}
	g := m.cfg
	return 6*float64(n) + 6*float64(g.Layers)*float64(g.Width)*float64(g.Context)
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
// token at every position (targets -1 ignored).
//
// Parameters are named as GPT-2's checkpoints name them (wte, wpe,
// h.0.ln_1.weight, h.0.attn.c_attn.weight, ..., ln_f.bias); see
// docs/GPT.md for how they map onto other tools' tensors. Initialisation
// is GPT-2's: N(0, 0.02) for weights and embeddings, residual output
// projections (attn.c_proj, mlp.c_proj) scaled by 1/sqrt(2·Layers), zero
// biases, unit norm gains. Biases, norm parameters and the position table
// are exempt from weight decay (ParamSpec.NoDecay). SetRecompute trades
// the activations' memory for arithmetic on the per-layer path.
type GPT struct {
	name string
	cfg  GPTConfig

	blocks    []Layer // the residual blocks, two per layer; one checkpoint per layer with RecomputeBlock
	recompute Recompute
	lnf       *LayerNorm
	head      *Linear // tied to wte
	uses      [][]paramUse
	first     []int // first owned parameter index of blocks[i]
	lnf0      int   // first parameter index of ln_f

	precision compute.Precision
	fused     compute.FusedGPT // the engine's fused model (GPTFuser), when it runs
	unfused   error            // why an engine that fuses GPTs does not run this one (auto precision)
	rows      int              // sequences per micro-batch (Build's)

	e          compute.Engine
	idx        compute.Indexing
	wte, wpe   compute.Tensor // (V,C), (T,C)
	dwte, dwpe compute.Tensor
	addWTE     bool
	x0         compute.Tensor // (B·T, C) embeddings
	pos        compute.Labels // (B·T) position of every row
	tokens     compute.Labels // the last Forward's
	logits     compute.Tensor
	dlogits    compute.Tensor // (B·T, V)
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
	m := &GPT{name: name, cfg: g, recompute: RecomputeNone}
	m.blocks = m.makeBlocks()
	m.lnf = NewLayerNorm("ln_f", g.Width)
	m.head = NewLinear("lm_head", g.Width, g.Vocab, compute.Identity)
	m.head.TiedWeight, m.head.NoBias = "wte", true
	return m, nil
}

// makeBlocks composes the layers' blocks for m's recompute mode: per
// layer x + attn(ln_1(x)) and x + mlp(ln_2(x)), both in one checkpoint
// with RecomputeBlock, every MLP's GELU output in one shared buffer with
// RecomputeGELU.
func (m *GPT) makeBlocks() []Layer {
	g, c := m.cfg, m.cfg.Width
	proj := 0.02 / math.Sqrt(2*float64(g.Layers))
	linear := func(name string, in, out int, std float64) *Linear {
		l := NewLinear(name, in, out, compute.Identity)
		l.WeightInit, l.WeightStd = Normal, std
		return l
	}
	pool, hidden := recomputePools(m.recompute)
	var blocks []Layer
	for i := 0; i < g.Layers; i++ {
		h := fmt.Sprintf("h.%d.", i)
		mlp := NewGELUMLP(h+"mlp", c, 4*c, 0.02, proj)
		mlp.SharedHidden = hidden
		attn := NewResidual(h+"attn",
			NewLayerNorm(h+"ln_1", c),
			linear(h+"attn.c_attn", c, 3*c, 0.02),
			NewCausalSelfAttention(h+"attn", g.Context, c, g.Heads),
			linear(h+"attn.c_proj", c, c, proj))
		ffn := NewResidual(h+"mlp", NewLayerNorm(h+"ln_2", c), mlp)
		if pool != nil {
			blocks = append(blocks, NewCheckpoint(fmt.Sprintf("h.%d", i), pool, attn, ffn))
		} else {
			blocks = append(blocks, attn, ffn)
		}
	}
	return blocks
}

// SetRecompute chooses which activations the model recomputes in backward
// (before Build): RecomputeNone (or ""), RecomputeGELU or RecomputeBlock.
// It runs on the per-layer path only: an engine that would run the model
// fused in bf16 (auto or bf16 precision on a compute.GPTFuser) fails the
// build.
func (m *GPT) SetRecompute(r Recompute) error {
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
func (m *GPT) Recompute() Recompute { return m.recompute }

// SetPrecision chooses how the model computes (before Build):
// compute.PrecisionAuto (bf16 on an engine that fuses the model,
// compute.GPTFuser, such as the CUDA engine; fp32 elsewhere),
// compute.PrecisionBF16 (an error at Build on an engine that does not fuse
// it) or compute.PrecisionF32 (the engine's operation groups; the CUDA
// engine has not all of them).
func (m *GPT) SetPrecision(p compute.Precision) error {
	switch p {
	case compute.PrecisionAuto, compute.PrecisionF32, compute.PrecisionBF16:
		m.precision = p
		return nil
	}
	return fmt.Errorf("precision %q: want bf16, fp32 or auto", string(p))
}

// Precision is what SetPrecision chose; after Build, what runs (bf16 or
// fp32).
func (m *GPT) Precision() compute.Precision { return m.precision }

// Fused is the engine's fused model when the GPT runs fused (nil on the
// per-layer path): Describe says what runs.
func (m *GPT) Fused() compute.FusedGPT { return m.fused }

// Unfused says why the model runs in fp32 on the per-layer path of an
// engine that runs GPTs fused: at compute.PrecisionAuto a shape its fused
// kernels do not take (compute.ErrFusedShape: a head size, a context
// length) falls back to the engine's fp32 operation groups. nil otherwise.
func (m *GPT) Unfused() error { return m.unfused }

// BuildReport says what runs after Build (BuildReporter): the fused
// model's description, or a warning when a shape the fused kernels do not
// take fell back to fp32 on the engine's operation groups.
func (m *GPT) BuildReport() (string, bool) {
	switch {
	case m.fused != nil:
		return m.fused.Describe(), false
	case m.unfused != nil:
		return fmt.Sprintf("runs in fp32 on the engine's per-layer operations, not fused in bf16 (much slower): %v", m.unfused), true
	}
	return "", false
}

// Config is the model's sizes.
func (m *GPT) Config() GPTConfig { return m.cfg }

// Name is the registry name.
func (m *GPT) Name() string { return m.name }

// embeddings declares wte (V,C) and wpe (T,C).
func (m *GPT) embeddings() []ParamSpec {
	g := m.cfg
	return []ParamSpec{
		{Name: "wte", Shape: []int{g.Vocab, g.Width}, Init: Normal, Std: 0.02},
		{Name: "wpe", Shape: []int{g.Context, g.Width}, Init: Normal, Std: 0.02, NoDecay: true},
	}
}

// declared is every layer's parameters in forward order, tied uses
// included: embeddings, blocks, ln_f, head.
func (m *GPT) declared() [][]ParamSpec {
	d := [][]ParamSpec{m.embeddings()}
	for _, b := range m.blocks {
		d = append(d, b.Params())
	}
	return append(d, m.lnf.Params(), m.head.Params())
}

// Params lists wte, wpe, each block's parameters and ln_f's (the head's
// weight is wte). Every 1-D parameter is exempt from weight decay.
func (m *GPT) Params() []ParamSpec {
	out := owned(m.declared())
	for i := range out {
		if len(out[i].Shape) == 1 {
			out[i].NoDecay = true
		}
	}
	return out
}

// Data is windows of Context token ids with a next-token target at every
// position, over Vocab tokens.
func (m *GPT) Data() datasets.Spec {
	return datasets.Spec{Input: []int{m.cfg.Context}, Tokens: true, Targets: m.cfg.Context, Classes: m.cfg.Vocab}
}

// Build binds the views, asks the engine for the operation groups the
// layers need and allocates the activations of rows sequences.
func (m *GPT) Build(e compute.Engine, params, grads []compute.Tensor, rows int) error {
	if err := m.build(e, params, grads, rows); err != nil {
		return fmt.Errorf("build model %s: %w", m.name, err)
	}
	return nil
}

func (m *GPT) build(e compute.Engine, params, grads []compute.Tensor, rows int) error {
	if rows <= 0 {
		return fmt.Errorf("%d sequences", rows)
	}
	specs := m.Params()
	if len(params) != len(specs) || len(grads) != len(specs) {
		return fmt.Errorf("got %d parameter and %d gradient views, want %d of each", len(params), len(grads), len(specs))
	}
	if m.fused != nil {
		return fmt.Errorf("built twice")
	}
	m.rows = rows
	if _, ok := e.(compute.GPTFuser); ok && m.precision != compute.PrecisionF32 && m.recompute != RecomputeNone {
		p := "auto"
		if m.precision != compute.PrecisionAuto {
			p = string(m.precision)
		}
		return fmt.Errorf("recompute %s runs on the per-layer path: set precision fp32 (at precision %s engine %s runs the model fused in bf16, which keeps activations of its own)",
			m.recompute, p, e.Name())
	}
	if fu, ok := e.(compute.GPTFuser); ok && m.precision != compute.PrecisionF32 {
		g := m.cfg
		f, err := fu.FuseGPT(compute.GPTShape{Layers: g.Layers, Heads: g.Heads, Width: g.Width, Context: g.Context, Vocab: g.Vocab, Rows: rows}, params, grads)
		switch {
		case err == nil:
			m.e, m.fused, m.precision = e, f, compute.PrecisionBF16
			// the parameter index each block starts at (6 per block), for ready
			m.first = make([]int, len(m.blocks))
			for i := range m.first {
				m.first[i] = 2 + 6*i
			}
			m.lnf0 = 2 + 6*len(m.blocks)
			return nil
		case m.precision == compute.PrecisionAuto && errors.Is(err, compute.ErrFusedShape):
			m.unfused = err // fp32 on the engine's operation groups, below
		default:
			return err
		}
	}
	if m.precision == compute.PrecisionBF16 {
		return fmt.Errorf("bf16 needs an engine that runs the GPT fused (the CUDA engine); engine %s computes in fp32", e.Name())
	}
	m.precision = compute.PrecisionF32
	idx, err := compute.Require[compute.Indexing](e, "embedding lookup")
	if err != nil {
		return err
	}
	declared := m.declared()
	uses, err := resolveTies(declared)
	if err != nil {
		return err
	}
	m.e, m.idx, m.uses = e, idx, uses
	g, bt := m.cfg, rows*m.cfg.Context
	m.wte, m.wpe, m.dwte, m.dwpe = params[0], params[1], grads[0], grads[1]
	m.addWTE = uses[0][0].add
	layers := append(append([]Layer(nil), m.blocks...), m.lnf, m.head)
	m.first = make([]int, len(layers))
	next := 2 // after wte and wpe
	for i, l := range layers {
		b, n := layerBuild(Build{Engine: e, Batch: bt, In: []int{g.Width}, NeedInputGrad: true}, declared[i+1], uses[i+1], params, grads)
		m.first[i], next = next, next+n
		if _, err := l.Build(b); err != nil {
			return err
		}
	}
	m.lnf0 = m.first[len(m.blocks)]
	m.x0 = e.Alloc(bt, g.Width)
	m.pos = e.AllocLabels(bt)
	pos := make([]int32, bt)
	for i := range pos {
		pos[i] = int32(i % g.Context)
	}
	e.SetLabels(m.pos, pos)
	m.dlogits = e.Alloc(bt, g.Vocab)
	return nil
}

// Forward embeds in.Tokens (B·T), runs the blocks, the final norm and the
// head, and the cross-entropy of the logits (B·T, V) against in.Targets.
func (m *GPT) Forward(in Inputs, scale float32, stats compute.Tensor) {
	if m.fused != nil {
		m.fused.Forward(in.Tokens, in.Targets, scale, stats)
		return
	}
	m.logits = m.forwardLogits(in.Tokens)
	m.e.SoftmaxCrossEntropy(m.logits, in.Targets, m.dlogits, scale, stats)
}

// forwardLogits runs the model up to the logits (B·T, V).
func (m *GPT) forwardLogits(tokens compute.Labels) compute.Tensor {
	m.tokens = tokens
	m.idx.GatherRows(m.x0, m.wte, tokens, false) // x0 (B·T,C) = wte[tokens]
	m.idx.GatherRows(m.x0, m.wpe, m.pos, true)   // x0 += wpe[t]
	h := m.x0
	for _, b := range m.blocks {
		h = b.Forward(h)
	}
	return m.head.Forward(m.lnf.Forward(h))
}

// Logits is the last Forward's logits (B·T, V): row b·T+t scores the token
// after position t of sequence b (nil when the model runs fused: see
// compute.FusedGPT.NextLogits).
func (m *GPT) Logits() compute.Tensor { return m.logits }

// Backward propagates the loss's gradient from the head to the embeddings,
// calling ready as ln_f, each block and finally the embeddings finish.
func (m *GPT) Backward(ready func(firstParam int)) {
	if m.fused != nil {
		m.fused.Backward()
		if ready != nil { // every gradient is final once the fused backward is enqueued
			ready(m.lnf0)
			for i := len(m.first) - 1; i >= 0; i-- {
				ready(m.first[i])
			}
			ready(0)
		}
		return
	}
	d := m.head.Backward(m.dlogits) // dwte = dlogitsᵀ·h (the head's use of wte)
	d = m.lnf.Backward(d)
	if ready != nil {
		ready(m.lnf0)
	}
	for i := len(m.blocks) - 1; i >= 0; i-- {
		d = m.blocks[i].Backward(d)
		if ready != nil {
			ready(m.first[i])
		}
	}
	if !m.addWTE {
		m.e.Zero(m.dwte)
	}
	m.idx.ScatterAddRows(m.dwte, d, m.tokens) // the embedding's use of wte
	m.e.Zero(m.dwpe)
	m.idx.ScatterAddRows(m.dwpe, d, m.pos)
	if ready != nil {
		ready(0)
	}
}

// ActivationBytes is what a build for seqs sequences allocates for its
// activations on the CPU engine, in bytes, in m's recompute mode
// (docs/GPT.md's table). With R = B·T rows, one layer keeps
// 32·R·C + 4·R + B·H·T² floats (the probabilities B·H·T² in attention's
// plan), and the model 4·R·C + 3·R + 2·R·V besides (the embeddings and
// positions, ln_f, the head's input gradient, the logits and their
// gradient). RecomputeGELU keeps one GELU output (R,4C) for all layers
// instead of one each; RecomputeBlock keeps one layer's activations for
// all, each layer's output (R,C) and the layers' alternating input
// gradients (two of R·C). Not counted: attention's scratch of 64 rows of T
// per plan.
func (m *GPT) ActivationBytes(seqs int) int64 {
	g := m.cfg
	b, t, c, h, v := int64(seqs), int64(g.Context), int64(g.Width), int64(g.Heads), int64(g.Vocab)
	r, layers := b*t, int64(g.Layers)
	layer := 32*r*c + 4*r + b*h*t*t
	var n int64
	switch m.recompute {
	case RecomputeGELU:
		n = layers*(layer-4*r*c) + 4*r*c
	case RecomputeBlock:
		n = layers*r*c + layer + min(layers, 2)*r*c
	default:
		n = layers * layer
	}
	return 4 * (n + 4*r*c + 3*r + 2*r*v)
}
