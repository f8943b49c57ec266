package models

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/symddp/symddp/compute"
)

// Describe gives the model's sizes (ddp.ModelDescriber), so that a
// checkpoint records its heads, which its tensors' shapes do not show.
func (m *GPT) Describe() map[string]int {
	g := m.cfg
	return map[string]int{"layers": g.Layers, "heads": g.Heads, "width": g.Width, "context": g.Context, "vocab": g.Vocab}
}

// GPTConfigOf reads a GPTConfig back from Describe's map.
func GPTConfigOf(d map[string]int) (GPTConfig, error) {
	g := GPTConfig{Layers: d["layers"], Heads: d["heads"], Width: d["width"], Context: d["context"], Vocab: d["vocab"]}
	return g, g.Validate()
}

// SampleOptions control Generate.
type SampleOptions struct {
	// Temperature divides the logits; 0 picks the most likely token
	// (greedy).
	Temperature float64
	// TopK keeps the K most likely tokens (0: all).
	TopK int
	// Seed drives the draws.
	Seed uint64
	// Vocab limits the draw to tokens 0..Vocab-1 (a padded vocabulary's
	// real part; 0: all).
	Vocab int
	// Emit, when set, is called with each token as it is drawn, in order,
	// before the next one is computed: a program prints the text as it
	// comes.
	Emit func(token int32)
}

// ErrPromptTooLong is returned by Generate for a prompt that does not fit
// the model's context.
var ErrPromptTooLong = errors.New("prompt longer than the model's context")

// LanguageModel is a model that writes text: built, it continues a prompt
// (Generate), and NewSampler builds a copy of it for one sequence. Every
// Decoder (GPT and Llama among them) is a language model.
type LanguageModel interface {
	Model
	// Generate continues prompt by n tokens, drawn one at a time from the
	// built model's next-token distribution, and returns the n tokens
	// drawn, without the prompt (see Decoder.Generate).
	Generate(ctx context.Context, prompt []int32, n int, o SampleOptions) ([]int32, error)
	// Fresh returns a new model of the same sizes and settings (the
	// precision a build chose included), not built.
	Fresh() (LanguageModel, error)
}

var (
	_ LanguageModel = (*GPT)(nil)
	_ LanguageModel = (*Llama)(nil)
)

// Generate continues prompt by n tokens, drawn one at a time from the
// model's next-token distribution, and returns the n tokens drawn (not the
// prompt). The model must be built (for any number of sequences; it uses
// the first). When the text outgrows the context the window slides: the
// model sees the last Context tokens. Every token runs a forward over the
// window and, on a device engine, copies the logits back: it is for
// samples after training, not for serving (no key/value cache). On a host
// engine a window shorter than the context runs through a build of the
// model for one sequence at the smallest context of 64, 128, 256, ... that
// holds it (DecoderSpec.AtContext; over the same parameters), made at the
// first such window and kept for the call, rather than a forward over the
// whole context: the same logits up to rounding, as attention is causal
// and every other layer works row by row (bit for bit with the pure-Go
// GEMM; OpenBLAS rounds a matrix's last rows otherwise than the same rows
// inside a taller one: TestGenerateShortContextsSameLogits), for a
// fraction of the arithmetic. On a device a forward over the whole
// context of one sequence is fast, and a build of another context would
// copy the weights again in bf16.
//
// Cancelling ctx stops it between two tokens: it returns what it has and
// ctx's error.
func (d *Decoder) Generate(ctx context.Context, prompt []int32, n int, o SampleOptions) ([]int32, error) {
	if d.e == nil {
		return nil, errors.New("generate: the model is not built")
	}
	runs := map[int]*window{d.spec.Context: newWindow(d)}
	next := func(text []int32) ([]float32, error) {
		t := d.shortContext(len(text))
		w := runs[t]
		if w == nil {
			s, err := d.atContext(t)
			if err != nil {
				return nil, err
			}
			w = newWindow(s)
			runs[t] = w
		}
		return w.logits(text), nil
	}
	return generate(ctx, d.spec.Context, d.spec.Vocab, next, prompt, n, o)
}

// window is a built Decoder with the token buffers of one forward.
type window struct {
	d      *Decoder
	tokens compute.Labels
	host   []int32
	buf    []float32
}

func newWindow(d *Decoder) *window {
	n := d.rows * d.spec.Context
	return &window{d: d, tokens: d.e.AllocLabels(n), host: make([]int32, n)}
}

// logits runs the model on text (at most its context) as its first
// sequence and returns the logits of text's last position.
func (w *window) logits(text []int32) []float32 {
	clear(w.host)
	copy(w.host, text)
	w.d.e.SetLabels(w.tokens, w.host)
	return logitsRow(w.d.e, w.d.ForwardLogits(w.tokens), len(text)-1, w.d.spec.Vocab, &w.buf)
}

// shortContext is the context Generate runs a window of n tokens at: d's
// own on a device engine, for a spec without AtContext, or where n needs
// it; else the smallest of 64, 128, 256, ... that holds n.
func (d *Decoder) shortContext(n int) int {
	full := d.spec.Context
	if d.spec.AtContext == nil || compute.HostData(d.embed) == nil {
		return full
	}
	t := 64
	for t < n {
		t *= 2
	}
	return min(t, full)
}

// atContext builds d's model at context t for one sequence over d's
// parameters (DecoderSpec.AtContext): each of its parameters is d's of the
// same name and shape, or the first rows of it.
func (d *Decoder) atContext(t int) (*Decoder, error) {
	s, err := NewDecoder(d.name, d.spec.AtContext(t))
	if err != nil {
		return nil, fmt.Errorf("%s at context %d: %w", d.name, t, err)
	}
	s.precision = d.precision
	if err := s.SetRecompute(d.recompute); err != nil { // no more memory than d's activations
		return nil, err
	}
	mine, theirs := d.Params(), s.Params()
	if len(mine) != len(theirs) {
		return nil, fmt.Errorf("%s at context %d has %d parameters, at %d %d", d.name, t, len(theirs), d.spec.Context, len(mine))
	}
	pv, gv := make([]compute.Tensor, len(theirs)), make([]compute.Tensor, len(theirs))
	for i, p := range theirs {
		q := mine[i]
		if p.Name != q.Name || len(p.Shape) != len(q.Shape) || p.Shape[0] > q.Shape[0] || !slices.Equal(p.Shape[1:], q.Shape[1:]) {
			return nil, fmt.Errorf("%s at context %d: parameter %d is %s %v, at %d %s %v: not its first rows",
				d.name, t, i, p.Name, p.Shape, d.spec.Context, q.Name, q.Shape)
		}
		pv[i] = d.e.View(arenaOf(d.params[i]), 0, p.Shape...)
		gv[i] = d.e.View(arenaOf(d.grads[i]), 0, p.Shape...)
	}
	if err := s.Build(d.e, pv, gv, 1); err != nil {
		return nil, err
	}
	return s, nil
}

// Fresh returns a new Decoder of d's spec, precision (the one a build
// chose) and recompute mode, not built.
func (d *Decoder) Fresh() (LanguageModel, error) {
	s, err := NewDecoder(d.name, d.spec)
	if err != nil {
		return nil, err
	}
	s.precision = d.precision
	if err := s.SetRecompute(d.recompute); err != nil {
		return nil, err
	}
	return s, nil
}

// Fresh returns a new GPT of m's sizes, precision and recompute mode, not
// built.
func (m *GPT) Fresh() (LanguageModel, error) {
	s, err := NewGPT(m.Name(), m.cfg)
	if err != nil {
		return nil, err
	}
	s.precision = m.precision
	if err := s.SetRecompute(m.Recompute()); err != nil {
		return nil, err
	}
	return s, nil
}

// Fresh returns a new Llama of m's sizes and recompute mode, not built.
func (m *Llama) Fresh() (LanguageModel, error) {
	s, err := NewLlama(m.Name(), m.cfg)
	if err != nil {
		return nil, err
	}
	if err := s.SetRecompute(m.Recompute()); err != nil {
		return nil, err
	}
	return s, nil
}

// logitsRow is row of logits (rows of v): the tensor's own memory on a
// host engine, else a copy of all of it in *buf (allocated once).
func logitsRow(e compute.Engine, logits compute.Tensor, row, v int, buf *[]float32) []float32 {
	all := compute.HostData(logits) // host engines: no copy
	if all == nil {
		if *buf == nil {
			*buf = make([]float32, logits.Size())
		}
		e.ReadTensor(*buf, logits)
		all = *buf
	}
	return all[row*v : (row+1)*v]
}

// generate is Generate for a model of context t and vocabulary v: next
// runs the model on the window (the last t tokens of the text) and returns
// the logits of its last position.
func generate(ctx context.Context, t, v int, next func(window []int32) ([]float32, error),
	prompt []int32, n int, o SampleOptions) ([]int32, error) {
	if len(prompt) == 0 {
		return nil, errors.New("generate: an empty prompt")
	}
	if len(prompt) > t {
		return nil, fmt.Errorf("generate: %w (%d tokens, context %d)", ErrPromptTooLong, len(prompt), t)
	}
	for _, tok := range prompt {
		if tok < 0 || int(tok) >= v {
			return nil, fmt.Errorf("generate: prompt token %d outside the vocabulary of %d", tok, v)
		}
	}
	vocab := v
	if o.Vocab > 0 && o.Vocab < v {
		vocab = o.Vocab
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5a3b1e))
	text := slices.Clone(prompt)
	probs := make([]float64, vocab)
	order := make([]int, vocab)
	for range n {
		if err := ctx.Err(); err != nil {
			return text[len(prompt):], err
		}
		row, err := next(text[max(0, len(text)-t):])
		if err != nil {
			return text[len(prompt):], fmt.Errorf("generate: %w", err)
		}
		tok := int32(draw(row[:vocab], probs, order, o, rng))
		text = append(text, tok)
		if o.Emit != nil {
			o.Emit(tok)
		}
	}
	return text[len(prompt):], nil
}

// draw picks a token from one row of logits.
func draw(row []float32, probs []float64, order []int, o SampleOptions, rng *rand.Rand) int {
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	if o.Temperature <= 0 {
		return best
	}
	for j := range order {
		order[j] = j
	}
	k := len(row)
	if o.TopK > 0 && o.TopK < k {
		slices.SortFunc(order, func(a, b int) int {
			switch {
			case row[a] > row[b]:
				return -1
			case row[a] < row[b]:
				return 1
			}
			return a - b
		})
		k = o.TopK
	}
	sum := 0.0
	for i := 0; i < k; i++ {
		j := order[i]
		probs[i] = math.Exp((float64(row[j]) - float64(row[best])) / o.Temperature)
		sum += probs[i]
	}
	u := rng.Float64() * sum
	for i := 0; i < k; i++ {
		if u -= probs[i]; u <= 0 {
			return order[i]
		}
	}
	return order[k-1]
}

// NewSampler returns a copy of m built for one sequence on e over the
// given parameter values (a trainer's Params, in m's Params order), for
// Generate: a model built for a training micro-batch runs every sequence
// of it for each token. The copy has m's type: a *GPT for a *GPT, a
// LanguageModel for a LanguageModel. A device without room for it gives an
// error wrapping compute.ErrDeviceMemory (the engine's Alloc panics with a
// *compute.DeviceMemoryError; other panics go on).
func NewSampler[M LanguageModel](m M, e compute.Engine, params []float32) (_ M, err error) {
	var none M
	defer func() { compute.RecoverDeviceMemory(recover(), &err, "sampler for "+m.Name()) }()
	fresh, err := m.Fresh()
	if err != nil {
		return none, err
	}
	s, ok := fresh.(M)
	if !ok {
		return none, fmt.Errorf("sampler for %s: Fresh made a %T, not a %T", m.Name(), fresh, m)
	}
	specs := s.Params()
	offsets, n := Layout(specs)
	if len(params) != n {
		return none, fmt.Errorf("sampler for %s: %d parameter values, want %d", m.Name(), len(params), n)
	}
	// the values go to arenas in the engine's memory (host or device)
	pt, gt := e.Alloc(n), e.Alloc(n)
	e.SetTensor(pt, params)
	pa, ga := arenaOf(pt), arenaOf(gt)
	pv, gv := make([]compute.Tensor, len(specs)), make([]compute.Tensor, len(specs))
	for i, sp := range specs {
		pv[i], gv[i] = e.View(pa, offsets[i], sp.Shape...), e.View(ga, offsets[i], sp.Shape...)
	}
	if err := s.Build(e, pv, gv, 1); err != nil {
		return none, err
	}
	return s, nil
}

// LanguageModelOf returns the language model, not built, that a
// checkpoint of model name records with config (its Describe map,
// ddp.Weights.Config): a Llama when config has key/value heads, a GPT
// otherwise. Only GPTs and Llamas describe themselves; a checkpoint that
// records no sizes (a classifier, or a Decoder of one's own spec) is
// refused: rebuild such a model with the factory that trained it, read its
// weights with ddp.ReadInitWeights and sample with NewSampler.
func LanguageModelOf(name string, config map[string]int) (LanguageModel, error) {
	if len(config) == 0 {
		return nil, fmt.Errorf("model %q: the checkpoint records no sizes, so it is neither a GPT nor a Llama: "+
			"build it with the factory it was trained with (models.New and the run's settings) and read its weights with ddp.ReadInitWeights", name)
	}
	if _, ok := config["kv_heads"]; ok {
		l, err := LlamaConfigOf(config)
		if err != nil {
			return nil, err
		}
		return NewLlama(name, l)
	}
	g, err := GPTConfigOf(config)
	if err != nil {
		return nil, err
	}
	return NewGPT(name, g)
}

// arenaOf is an engine tensor (host or device memory) as an arena.
func arenaOf(t compute.Tensor) compute.Arena {
	if h := compute.HostData(t); h != nil {
		return compute.HostArena(h)
	}
	d, ok := t.(interface{ DevicePtr() uintptr })
	if !ok {
		panic(fmt.Sprintf("models: engine tensor %T is neither host memory nor has a DevicePtr", t))
	}
	return compute.Arena{Dev: d.DevicePtr(), N: t.Size()}
}

// LoadParams reads the model's parameters from get (name, destination) into the
// parameter views params (what Build received), for sampling from a
// checkpoint.
func LoadParams(e compute.Engine, specs []ParamSpec, params []compute.Tensor, get func(name string, dst []float32) error) error {
	for i, s := range specs {
		buf := make([]float32, s.Size())
		if err := get(s.Name, buf); err != nil {
			return err
		}
		e.SetTensor(params[i], buf)
	}
	return nil
}
