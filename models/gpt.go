package models

import (
	"errors"
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
// spec (GPTConfig.DecoderSpec) that also runs fused in bf16 on an engine that
// fuses GPTs (compute.GPTFuser).
//
// Parameters are named as GPT-2's checkpoints name them (wte, wpe,
// h.0.ln_1.weight, h.0.attn.c_attn.weight, ..., ln_f.bias); see
// docs/GPT.md for how they map onto other tools' tensors. Initialisation
// is GPT-2's: N(0, 0.02) for weights and embeddings, residual output
// projections (attn.c_proj, mlp.c_proj) scaled by 1/sqrt(2·Layers), zero
// biases, unit norm gains. Biases, norm parameters and the position table
// are exempt from weight decay (ParamSpec.NoDecay). SetRecompute trades
// the activations' memory for arithmetic on the per-layer path only: an
// engine that would run the model fused in bf16 fails the build.
type GPT struct {
	*Decoder
	cfg GPTConfig

	precision compute.Precision
	fused     compute.FusedGPT // the engine's fused model (GPTFuser), when it runs
	unfused   error            // why an engine that fuses GPTs does not run this one (auto precision)
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
	}
}

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

// Build runs the model fused in bf16 on an engine that fuses GPTs (unless
// the precision is fp32), else binds the views, asks the engine for the
// operation groups the layers need and allocates the activations of rows
// sequences (Decoder.Build).
func (m *GPT) Build(e compute.Engine, params, grads []compute.Tensor, rows int) error {
	if err := m.build(e, params, grads, rows); err != nil {
		return fmt.Errorf("build model %s: %w", m.Name(), err)
	}
	return nil
}

func (m *GPT) build(e compute.Engine, params, grads []compute.Tensor, rows int) error {
	if err := m.checkBuild(params, grads, rows); err != nil {
		return err
	}
	fu, fuses := e.(compute.GPTFuser)
	if fuses && m.precision != compute.PrecisionF32 && m.Recompute() != RecomputeNone {
		p := "auto"
		if m.precision != compute.PrecisionAuto {
			p = string(m.precision)
		}
		return fmt.Errorf("recompute %s runs on the per-layer path: set precision fp32 (at precision %s engine %s runs the model fused in bf16, which keeps activations of its own)",
			m.Recompute(), p, e.Name())
	}
	if fuses && m.precision != compute.PrecisionF32 {
		g := m.cfg
		f, err := fu.FuseGPT(compute.GPTShape{Layers: g.Layers, Heads: g.Heads, Width: g.Width, Context: g.Context, Vocab: g.Vocab, Rows: rows}, params, grads)
		switch {
		case err == nil:
			m.fused, m.precision = f, compute.PrecisionBF16
			m.e, m.rows = e, rows // built: for Generate, and against a second Build
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
	return m.Decoder.build(e, params, grads, rows)
}

// Forward runs the model and the cross-entropy of its logits (B·T, V)
// against in.Targets: fused, or as Decoder.Forward.
func (m *GPT) Forward(in Inputs, scale float32, stats compute.Tensor) {
	if m.fused != nil {
		m.fused.Forward(in.Tokens, in.Targets, scale, stats)
		return
	}
	m.Decoder.Forward(in, scale, stats)
}

// Backward propagates the loss's gradient from the head to the embeddings,
// calling ready as ln_f, each block and finally the embeddings finish
// (Decoder.Backward). Logits is nil when the model runs fused (see
// compute.FusedGPT.NextLogits).
func (m *GPT) Backward(ready func(firstParam int)) {
	if m.fused == nil {
		m.Decoder.Backward(ready)
		return
	}
	m.fused.Backward()
	if ready != nil { // every gradient is final once the fused backward is enqueued
		blocks := 2 * m.cfg.Layers // 6 parameters each after wte and wpe
		ready(2 + 6*blocks)        // ln_f
		for i := blocks - 1; i >= 0; i-- {
			ready(2 + 6*i)
		}
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
