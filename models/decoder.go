package models

import (
	"errors"
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
)

// DecoderSpec describes a decoder-only language model to NewDecoder: what
// every such model has (a token embedding, learned positions or none, a
// final norm, an output head, the next-token cross-entropy) as settings,
// and its layers as functions that compose them from layers. GPT and
// Llama are a DecoderSpec each (GPTConfig and LlamaConfig make theirs);
// so is a model of the public layers alone (examples/ownlm).
//
// The spec is a recipe: NewDecoder calls Block and Norm to make the
// layers, and calls them again for a copy (Fresh) and for a recompute
// mode (SetRecompute), so they must return new layers each time.
//
// Parameters lie in the arenas in this order: the embedding, the position
// table (when there is one), each layer's blocks' parameters, the final
// norm's, the head's weight (none when it is tied to the embedding).
type DecoderSpec struct {
	// Vocab is the number of tokens (V), Context the longest sequence (T),
	// Width the residual stream's channels (C) and Layers the number of
	// layers (Block is called for 0 … Layers−1).
	Vocab, Context, Width, Layers int

	// Embedding names the token embedding (V, C), initialised N(0,
	// EmbeddingStd²): GPT-2's "wte", Llama's "model.embed_tokens.weight".
	Embedding    string
	EmbeddingStd float64
	// Positions names the learned position table (T, C), initialised
	// N(0, PositionStd²), decayed as a matrix and added to the token
	// embedding (GPT-2's "wpe"); "" for none, when the attention places
	// tokens itself (rotary embedding: Llama).
	Positions   string
	PositionStd float64

	// Block returns layer i's blocks, first to last: each maps (rows, C)
	// to (rows, C), as x + attn(norm(x)) and x + mlp(norm(x)) do. hidden
	// is nil unless the model recomputes its MLPs' hidden activation
	// (RecomputeGELU, which needs HiddenRecompute): then Block gives it to
	// them (GELUMLP.SharedHidden, SwiGLUMLP.SharedHidden).
	Block func(i int, hidden *ScratchPool) []Layer
	// LayerPrefix names layer i's checkpoint under RecomputeBlock,
	// LayerPrefix.i ("h" for GPT-2's h.0, h.1, ...; "layer" when empty).
	LayerPrefix string
	// HiddenRecompute says that Block puts its MLPs' hidden activation in
	// the pool it is given, so that the model takes RecomputeGELU; without
	// it SetRecompute refuses that mode.
	HiddenRecompute bool
	// Norm returns the final norm, from (rows, C) to (rows, C).
	Norm func() Layer

	// Head names the output head (V, C), a bias-free Linear whose weight
	// is Head+".weight" ("lm_head"), initialised N(0, HeadStd²); with
	// TiedHead it is the embedding itself (its gradient adds up both
	// uses) and takes no arena space.
	Head     string
	TiedHead bool
	HeadStd  float64

	// NoDecayVectors exempts every 1-D parameter (biases, norm gains) from
	// weight decay, as nanoGPT configures AdamW (the embeddings and the
	// position table, matrices, decay); without it only what the layers
	// exempt is (ParamSpec.NoDecay).
	NoDecayVectors bool
	// AttentionWidth is each layer's attention width (query heads × head
	// size) for FLOPsPerToken; 0 means Width.
	AttentionWidth int
	// Require, when set, asks the engine for the blocks' operation groups
	// (compute.Require) before any layer builds, so that an engine without
	// one fails the build naming the operation rather than a layer.
	Require func(e compute.Engine) error
	// AtContext, when set, is the same model at a context of t ≤ Context
	// tokens, whose parameters are this one's or, where their first
	// dimension counts positions (a position table), their first rows:
	// Generate on a host engine runs a short text through such a build
	// instead of a forward over the whole context (GPT and Llama set it).
	AtContext func(t int) DecoderSpec
}

// validate checks the spec's sizes and that its parts are there.
func (s DecoderSpec) validate() error {
	switch {
	case s.Vocab < 2 || s.Context < 1 || s.Width < 1 || s.Layers < 1:
		return fmt.Errorf("vocabulary %d, context %d, width %d, layers %d: need at least 2 tokens, 1 position, 1 channel and 1 layer",
			s.Vocab, s.Context, s.Width, s.Layers)
	case s.Embedding == "" || s.Head == "":
		return fmt.Errorf("embedding %q, head %q: a decoder names both", s.Embedding, s.Head)
	case s.Block == nil || s.Norm == nil:
		return errors.New("a decoder needs a Block and a Norm function")
	case s.AttentionWidth < 0:
		return fmt.Errorf("attention width %d", s.AttentionWidth)
	}
	return nil
}

// Decoder is a decoder-only transformer language model made of a
// DecoderSpec: token ids (B·T) are embedded (plus a learned position when
// the spec has a table), run through every layer's blocks, the final norm
// and the head to logits (B·T, V), and scored by the cross-entropy of the
// next token at every position (targets −1 ignored).
//
//	tokens (B·T) -> embedding (+ positions) (B·T,C) -> blocks (B·T,C)
//	-> norm (B·T,C) -> head (B·T,V) -> softmax cross-entropy
//
// It is a Model, a LanguageModel (Generate, Fresh), a Recomputer
// (SetRecompute: RecomputeBlock wraps each layer's blocks in one
// Checkpoint) and a FLOPsCounter. Backward reports parameters ready as the
// head and final norm, each block and finally the embedding finish.
type Decoder struct {
	name      string
	spec      DecoderSpec
	recompute Recompute
	blocks    []Layer // every layer's blocks; one Checkpoint per layer with RecomputeBlock
	norm      Layer
	head      *Linear
	first     []int // first owned parameter index of blocks[i]
	norm0     int   // first parameter index of the final norm
	rows      int   // sequences per micro-batch (Build's)

	precision compute.Precision // SetPrecision's; after Build, what runs
	fp32Why   error             // why an engine that computes in bf16 runs this model in fp32 (auto)
	notes     *bf16Notes        // what the bf16 plans run (BuildReport)
	bf        *bf16Decoder      // the bf16 build's masters, embedding and loss; nil in fp32

	e               compute.Engine
	idx             compute.Indexing
	embed, dembed   compute.Tensor // (V,C)
	posTable, dpos  compute.Tensor // (T,C); nil without positions
	addEmbed        bool           // the embedding's gradient adds to the tied head's
	x0              compute.Tensor // (B·T,C) embeddings
	pos             compute.Labels // (B·T) position of every row, with positions
	tokens          compute.Labels // the last Forward's
	logits, dlogits compute.Tensor // (B·T,V)

	params, grads []compute.Tensor // Build's views (Generate's shorter contexts)
}

var (
	_ Model         = (*Decoder)(nil)
	_ LanguageModel = (*Decoder)(nil)
	_ Recomputer    = (*Decoder)(nil)
	_ FLOPsCounter  = (*Decoder)(nil)
)

// NewDecoder returns the language model that spec describes, keeping every
// activation (SetRecompute chooses otherwise).
func NewDecoder(name string, spec DecoderSpec) (*Decoder, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	d := &Decoder{name: name, spec: spec, recompute: RecomputeNone}
	d.blocks = d.makeBlocks()
	if err := checkContexts(name, spec.Context, d.blocks); err != nil {
		return nil, err
	}
	d.norm = spec.Norm()
	d.head = normalLinear(spec.Head, spec.Width, spec.Vocab, spec.HeadStd)
	if spec.TiedHead {
		d.head.TiedWeight = spec.Embedding
	}
	return d, nil
}

// checkContexts refuses blocks whose layers attend within sequences of
// another length than the spec's Context (a layer with a Context method,
// as the attention layers have, found through the Layers of Residual,
// Checkpoint and Sequential): rows of 32-token windows attended as
// sequences of 128 would mix four windows, and 256-token windows attended
// as 128 would never look back further, both without an error. A spec
// copied from a preset and given another Context keeps the preset's
// attention; change the preset's config and make its spec again.
func checkContexts(name string, context int, layers []Layer) error {
	for _, l := range layers {
		if c, ok := l.(interface{ Context() int }); ok && c.Context() != context {
			who := fmt.Sprintf("a %T", l)
			if n, ok := l.(interface{ Name() string }); ok {
				who = n.Name()
			}
			return fmt.Errorf("decoder %s: %s attends within sequences of %d positions, the spec's Context is %d: build the blocks' attention with the spec's context (a preset's spec keeps its config's: set the config's Context, then call DecoderSpec again)",
				name, who, c.Context(), context)
		}
		if g, ok := l.(interface{ Layers() []Layer }); ok {
			if err := checkContexts(name, context, g.Layers()); err != nil {
				return err
			}
		}
	}
	return nil
}

// makeBlocks makes every layer's blocks for d's recompute mode: in one
// Checkpoint per layer with RecomputeBlock, with the MLPs' hidden
// activation in one shared pool with RecomputeGELU.
func (d *Decoder) makeBlocks() []Layer {
	pool, hidden := recomputePools(d.recompute)
	prefix := d.spec.LayerPrefix
	if prefix == "" {
		prefix = "layer"
	}
	var blocks []Layer
	for i := range d.spec.Layers {
		layer := d.spec.Block(i, hidden)
		if pool != nil {
			blocks = append(blocks, NewCheckpoint(fmt.Sprintf("%s.%d", prefix, i), pool, layer...))
		} else {
			blocks = append(blocks, layer...)
		}
	}
	return blocks
}

// SetRecompute chooses which activations the model recomputes in backward
// (before Build): RecomputeNone (or ""), RecomputeGELU (when the spec's
// blocks share their MLPs' hidden activation, HiddenRecompute) or
// RecomputeBlock.
func (d *Decoder) SetRecompute(r Recompute) error {
	r, err := ParseRecompute(string(r))
	if err != nil {
		return err
	}
	if d.e != nil {
		return fmt.Errorf("recompute %s: the model is built already", r)
	}
	if r == RecomputeGELU && !d.spec.HiddenRecompute {
		return fmt.Errorf("recompute %s: the blocks of %s share no MLP hidden activation (it takes none and block)", r, d.name)
	}
	d.recompute = r
	d.blocks = d.makeBlocks()
	return nil
}

// Recompute is the mode SetRecompute chose.
func (d *Decoder) Recompute() Recompute { return d.recompute }

// Name is the registry name.
func (d *Decoder) Name() string { return d.name }

// Spec is the spec the model was made of.
func (d *Decoder) Spec() DecoderSpec { return d.spec }

// declared is every layer's parameters in forward order, tied uses
// included: the embeddings, the blocks, the norm, the head.
func (d *Decoder) declared() [][]ParamSpec {
	s := d.spec
	emb := []ParamSpec{{Name: s.Embedding, Shape: []int{s.Vocab, s.Width}, Init: Normal, Std: s.EmbeddingStd}}
	if s.Positions != "" {
		emb = append(emb, ParamSpec{Name: s.Positions, Shape: []int{s.Context, s.Width}, Init: Normal, Std: s.PositionStd})
	}
	out := [][]ParamSpec{emb}
	for _, b := range d.blocks {
		out = append(out, b.Params())
	}
	return append(out, d.norm.Params(), d.head.Params())
}

// Params lists the embedding, the position table, each block's
// parameters, the final norm's and the head's (none when it is tied).
func (d *Decoder) Params() []ParamSpec {
	out := owned(d.declared())
	if d.spec.NoDecayVectors {
		for i := range out {
			if len(out[i].Shape) == 1 {
				out[i].NoDecay = true
			}
		}
	}
	return out
}

// Data is windows of Context token ids with a next-token target at every
// position, over Vocab tokens.
func (d *Decoder) Data() datasets.Spec {
	s := d.spec
	return datasets.Spec{Input: []int{s.Context}, Tokens: true, Targets: s.Context, Classes: s.Vocab}
}

// Build chooses the precision (SetPrecision), binds the views, asks the
// engine for the operation groups or bf16 plans the layers need and
// allocates the activations of rows sequences. A device without room for
// them is an error wrapping compute.ErrDeviceMemory.
func (d *Decoder) Build(e compute.Engine, params, grads []compute.Tensor, rows int) (err error) {
	defer func() {
		compute.RecoverDeviceMemory(recover(), &err, fmt.Sprintf("build model %s: activations of %d sequences", d.name, rows))
	}()
	if err := d.build(e, params, grads, rows); err != nil {
		return fmt.Errorf("build model %s: %w", d.name, err)
	}
	return nil
}

// checkBuild checks Build's arguments against the model.
func (d *Decoder) checkBuild(params, grads []compute.Tensor, rows int) error {
	if rows <= 0 {
		return fmt.Errorf("%d sequences", rows)
	}
	if d.e != nil {
		return errors.New("built twice")
	}
	if n := len(d.Params()); len(params) != n || len(grads) != n {
		return fmt.Errorf("got %d parameter and %d gradient views, want %d of each", len(params), len(grads), n)
	}
	return nil
}

func (d *Decoder) build(e compute.Engine, params, grads []compute.Tensor, rows int) error {
	if err := d.checkBuild(params, grads, rows); err != nil {
		return err
	}
	if d.spec.Require != nil {
		if err := d.spec.Require(e); err != nil {
			return err
		}
	}
	declared := d.declared()
	uses, err := resolveTies(declared)
	if err != nil {
		return err
	}
	if err := d.choosePrecision(e, params, grads, rows, declared, uses); err != nil {
		return err
	}
	s, bt := d.spec, rows*d.spec.Context
	if d.precision == compute.PrecisionBF16 {
		if err := d.buildBF16(e, params, grads, rows, declared, uses); err != nil {
			return err
		}
		d.norm0 = d.first[len(d.blocks)]
		d.e, d.rows, d.params, d.grads = e, rows, params, grads
		d.embed, d.dembed, d.addEmbed = params[0], grads[0], uses[0][0].add
		return nil
	}
	d.precision = compute.PrecisionF32
	idx, err := compute.Require[compute.Indexing](e, "embedding lookup")
	if err != nil {
		return err
	}
	layers := d.layers()
	d.first = make([]int, len(layers))
	next := len(declared[0]) // after the embeddings
	for i, l := range layers {
		b, n := layerBuild(Build{Engine: e, Batch: bt, In: []int{s.Width}, NeedInputGrad: true}, declared[i+1], uses[i+1], params, grads)
		d.first[i], next = next, next+n
		if _, err := l.Build(b); err != nil {
			return err
		}
	}
	d.norm0 = d.first[len(d.blocks)]
	d.e, d.idx, d.rows, d.params, d.grads = e, idx, rows, params, grads
	d.embed, d.dembed, d.addEmbed = params[0], grads[0], uses[0][0].add
	d.x0 = e.Alloc(bt, s.Width)
	if s.Positions != "" {
		d.posTable, d.dpos = params[1], grads[1]
		d.pos = e.AllocLabels(bt)
		pos := make([]int32, bt)
		for i := range pos {
			pos[i] = int32(i % s.Context)
		}
		e.SetLabels(d.pos, pos)
	}
	d.dlogits = e.Alloc(bt, s.Vocab)
	return nil
}

// Forward embeds in.Tokens (B·T), runs the blocks, the final norm and the
// head, and the cross-entropy of the logits (B·T, V) against in.Targets.
func (d *Decoder) Forward(in Inputs, scale float32, stats compute.Tensor) {
	d.logits = d.ForwardLogits(in.Tokens)
	if d.bf != nil {
		d.dlogits = d.bf.loss.Apply(d.logits, in.Targets, scale, stats) // in place of the logits
		return
	}
	d.e.SoftmaxCrossEntropy(d.logits, in.Targets, d.dlogits, scale, stats)
}

// ForwardLogits runs the built model on tokens (B·T) up to the logits
// (B·T, V), without the loss (for sampling; in bf16 the logits are bf16,
// which ReadTensor widens). In bf16 the masters are cast to their copies
// first.
func (d *Decoder) ForwardLogits(tokens compute.Labels) compute.Tensor {
	d.tokens = tokens
	if d.bf != nil {
		d.bf.masters.Cast()
		d.bf.embed.Forward(d.x0, tokens) // x0 (B·T,C) = embed[tokens] + positions[t]
	} else {
		d.idx.GatherRows(d.x0, d.embed, tokens, false) // x0 (B·T,C) = embed[tokens]
		if d.posTable != nil {
			d.idx.GatherRows(d.x0, d.posTable, d.pos, true) // x0 += positions[t]
		}
	}
	h := d.x0
	for _, b := range d.blocks {
		h = b.Forward(h)
	}
	return d.head.Forward(d.norm.Forward(h))
}

// Logits is the last Forward's logits (B·T, V): row b·T+t scores the token
// after position t of sequence b. In bf16 the loss overwrites them with
// their gradient (the fused classifier keeps no copy); Generate reads
// them before.
func (d *Decoder) Logits() compute.Tensor { return d.logits }

// Backward propagates the loss's gradient from the head to the embeddings,
// calling ready as the head and final norm, each block and finally the
// embeddings finish.
func (d *Decoder) Backward(ready func(firstParam int)) {
	dy := d.head.Backward(d.dlogits) // a tied head's use of the embedding: dlogitsᵀ·h
	dy = d.norm.Backward(dy)
	if ready != nil {
		ready(d.norm0) // the final norm and, when untied, the head after it
	}
	for i := len(d.blocks) - 1; i >= 0; i-- {
		dy = d.blocks[i].Backward(dy)
		if ready != nil {
			ready(d.first[i])
		}
	}
	if d.bf != nil {
		d.bf.embed.Backward(dy) // the embedding's use and the positions'
		if ready != nil {
			ready(0)
		}
		return
	}
	if !d.addEmbed {
		d.e.Zero(d.dembed)
	}
	d.idx.ScatterAddRows(d.dembed, dy, d.tokens) // the embedding's own use
	if d.posTable != nil {
		d.e.Zero(d.dpos)
		d.idx.ScatterAddRows(d.dpos, dy, d.pos)
	}
	if ready != nil {
		ready(0)
	}
}

// FLOPsPerToken is the arithmetic of training on one token, counted once
// (a tied head is not counted again): 6 per parameter (a multiply-add in
// the forward, two in the backward; the embeddings counted as if they were
// GEMM weights, as PaLM's appendix and nanoGPT count them), plus, per
// layer, attention's two products over the context, QKᵀ and PV: 2·2·A·T
// forward for a full context of attention width A, three times that with
// the backward, 12·L·A·T, half of it under the causal mask: 6·L·A·T.
// (nanoGPT's estimate_mfu counts the full 12·L·C·T.) The PyTorch peer,
// bench/torch_gpt_bench.py, counts the same. GPT-2 124M (N = 124,475,904
// with the vocabulary padded to 50304, L = 12, A = C = 768, T = 1024):
// 6N + 6LCT = 803,478,528 FLOPs per token. Key/value heads that query
// heads share (Llama's) do not change A.
func (d *Decoder) FLOPsPerToken() float64 {
	n := 0
	for _, p := range d.Params() {
		n += p.Size()
	}
	s := d.spec
	a := s.AttentionWidth
	if a == 0 {
		a = s.Width
	}
	return 6*float64(n) + 6*float64(s.Layers)*float64(a)*float64(s.Context)
}
