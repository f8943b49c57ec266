package models

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/symddp/symddp/compute"
)

// A model in bf16. The Decoder builds its layers in bf16 when the engine
// has a bf16 form of every operation of the model at its sizes
// (compute.BF16Tensors.CheckBF16): activations are bf16 tensors between
// layers, the weights the layers read are a bf16 copy of the fp32 masters
// that the model casts once per forward (compute.Masters), and every
// weight gradient goes in fp32 into the arena. The layers that have a bf16
// form (Linear, LayerNorm, CausalSelfAttention, GELUMLP, RMSNorm,
// SwiGLUMLP, GroupedSelfAttention, Residual) say so by implementing
// bf16Layer; a Residual in bf16 lets its last layer write
// the block's output onto the residual stream in its GEMM (streamOut) and
// its first layer add its input gradient into the stream's gradient
// (streamIn), so the stream is one tensor and its gradient another, each
// updated in place, as the fused kernels this replaces kept them.
//
// Recompute in bf16 is RecomputeBlock: each layer's blocks in one
// Checkpoint whose Scratch holds their bf16 activations (allocBF16), the
// GELU's pre-activation included (LinearSpec.Aux), while the last block's
// output, the stream at the next layer's entry, is kept in memory of its
// own (Build.keep); backward runs the layer's forward again from it.
// RecomputeGELU has none: the bf16 MLP's GELU is in c_fc's GEMM epilogue,
// whose output c_proj reads, so choosePrecision refuses it.

// bf16Layer is a layer with a bf16 form.
type bf16Layer interface {
	Layer
	// checkBF16 says whether the layer builds in bf16 on b (b.bf16 set),
	// without allocating: the shape of one output sample, as Build returns
	// it, or why not (the engine's words: a *compute.MissingOpError or an
	// error wrapping compute.ErrBF16Shape).
	checkBF16(b Build) (out []int, err error)
}

// streamOut is a layer that can end a residual block in bf16: built with
// Build.onto, its output is r + f(x), r the block's input.
type streamOut interface {
	forwardOnto(x, r compute.Tensor) compute.Tensor
}

// streamEnd is a layer that, when endsStream says so, can end an fp32
// residual block as the bf16 layers end theirs: its Backward(dy) reads dy
// without writing it, returns a gradient in memory other than dy's, and
// reads nothing of the layer's output. So the block adds its input onto
// that output in place instead of into a sum of its own, and, when its
// first layer adds its input gradient in (Residual.addsIn), keeps its
// output gradient and its input gradient in one tensor.
type streamEnd interface {
	endsStream() bool
}

// streamIn is a layer that can begin a residual block: built with
// Build.into, its Backward is backwardOnto, which adds the gradient at its
// input to stream in place: in bf16 the block's output gradient, in fp32
// the block's input gradient (Residual.addsIn).
type streamIn interface {
	backwardOnto(dy, stream compute.Tensor)
}

// bf16Views is a bf16 Build's parameter copies (Build.half), checked.
func (b Build) bf16Views(layer string, n int) ([]compute.Tensor, error) {
	if len(b.half) != n {
		return nil, fmt.Errorf("%s: %d bf16 parameter copies, want %d", layer, len(b.half), n)
	}
	return b.half, nil
}

// allocBF16 is Alloc of a bf16 tensor (Batch, shape...): from the Scratch
// when the layer has one (inside a Checkpoint), from the engine otherwise.
func (b Build) allocBF16(shape ...int) compute.Tensor {
	full := append([]int{b.Batch}, shape...)
	if b.Scratch != nil {
		return b.Scratch.alloc(b.Engine, compute.BF16, full)
	}
	return b.Engine.(compute.BF16Tensors).AllocBF16(full...)
}

// allocOutBF16 is allocBF16 for the output of a layer that ends a
// residual block (streamOut): the engine's memory when b.keep says that a
// Checkpoint keeps it as its output, the residual stream that the next
// block reads and recomputes from.
func (b Build) allocOutBF16(shape ...int) compute.Tensor {
	if b.keep {
		b.Scratch = nil
	}
	return b.allocBF16(shape...)
}

// gradPool is the input gradients (bf16) that the blocks of a bf16 Decoder
// share: a block's are live only while its Backward runs, so block k's
// first (rows, C) gradient can be block j's first too, as the fused GPT kept
// one buffer per role for all layers. Each block allocates through a part
// of the pool (Build.grads); the blocks' output gradient, the residual
// stream's, is not in it.
type gradPool struct {
	slots []scratchSlot
}

// gradPart is one block's allocator from a gradPool: its tensors are
// distinct from each other and, by shape in allocation order, the other
// blocks'.
type gradPart struct {
	pool  *gradPool
	taken []bool
}

// part returns a new block's allocator.
func (p *gradPool) part() *gradPart { return &gradPart{pool: p} }

func (g *gradPart) alloc(e compute.BF16Tensors, shape []int) compute.Tensor {
	p := g.pool
	g.taken = append(g.taken, make([]bool, len(p.slots)-len(g.taken))...)
	for i, sl := range p.slots {
		if !g.taken[i] && slices.Equal(sl.shape, shape) {
			g.taken[i] = true
			return sl.t
		}
	}
	t := e.AllocBF16(shape...)
	p.slots = append(p.slots, scratchSlot{dtype: compute.BF16, shape: slices.Clone(shape), t: t})
	g.taken = append(g.taken, true)
	return t
}

// allocGradBF16 is allocBF16 for an input gradient: from the block's part
// of the Decoder's gradient pool when the layer is inside a block.
func (b Build) allocGradBF16(shape ...int) compute.Tensor {
	if b.grads == nil {
		return b.allocBF16(shape...)
	}
	return b.grads.alloc(b.Engine.(compute.BF16Tensors), append([]int{b.Batch}, shape...))
}

// bf16Notes collects what a bf16 build's plans say they run, for the
// model's BuildReport.
type bf16Notes struct {
	seen  map[string]bool
	items []string
	// What the Linear layers' GEMMs took into their epilogues, over all of
	// them (noteLinear): said where the first one was noted.
	bias, gelu, residual bool
}

// linearNote marks the place of the Linear layers' description in items.
const linearNote = "\x00linear"

// noteLinear adds what a bf16 Linear layer's plan runs: cuBLASLt GEMMs and
// which of a bias, GELU and the residual add are in their epilogues.
func (b Build) noteLinear(bias, gelu, residual bool) {
	n := b.notes
	if n == nil {
		return
	}
	b.note(linearNote)
	n.bias = n.bias || bias
	n.gelu = n.gelu || gelu
	n.residual = n.residual || residual
}

// linear describes the Linear layers' plans from what noteLinear saw.
func (n *bf16Notes) linear() string {
	var epi []string
	if n.bias {
		epi = append(epi, "bias")
	}
	if n.gelu {
		epi = append(epi, "GELU")
	}
	if n.residual {
		epi = append(epi, "the residual add")
	}
	s := "cuBLASLt GEMMs"
	switch len(epi) {
	case 0:
		return s
	case 1:
		s += " with " + epi[0]
	default:
		s += " with " + strings.Join(epi[:len(epi)-1], ", ") + " and " + epi[len(epi)-1]
	}
	s += " in their epilogues"
	if n.bias {
		s += ", bias gradients by sdc_bias_act_backward"
	}
	return s
}

// note adds what once.
func (b Build) note(what string) {
	n := b.notes
	if n == nil || what == "" {
		return
	}
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	if !n.seen[what] {
		n.seen[what] = true
		n.items = append(n.items, what)
	}
}

// String joins the notes.
func (n *bf16Notes) String() string {
	items := make([]string, len(n.items))
	for i, it := range n.items {
		if it == linearNote {
			it = n.linear()
		}
		items[i] = it
	}
	return strings.Join(items, ", ")
}

// checkBF16Layer asks l whether it builds in bf16 on b.
func checkBF16Layer(l Layer, b Build) ([]int, error) {
	bl, ok := l.(bf16Layer)
	if !ok {
		return nil, fmt.Errorf("%T has no bf16 form", l)
	}
	return bl.checkBF16(b)
}

// errNoBF16 is what an engine without bf16 tensors is, at auto precision:
// no warning, the model runs in fp32 as on the CPU.
func errNoBF16(err error) bool {
	var missing *compute.MissingOpError
	return errors.As(err, &missing) && missing.Group == "BF16Tensors" && strings.HasPrefix(missing.Op, "bf16 tensors")
}

// SetPrecision chooses how the model computes (before Build):
// compute.PrecisionAuto (bf16 where the engine has a bf16 form of every
// layer at the model's sizes, such as the CUDA engine; fp32 elsewhere),
// compute.PrecisionBF16 (an error at Build where it has not) or
// compute.PrecisionF32 (the engine's fp32 operation groups).
func (d *Decoder) SetPrecision(p compute.Precision) error {
	switch p {
	case compute.PrecisionAuto, compute.PrecisionF32, compute.PrecisionBF16:
		if d.e != nil {
			return fmt.Errorf("precision %s: the model is built already", p)
		}
		d.precision = p
		return nil
	}
	return fmt.Errorf("precision %q: want bf16, fp32 or auto", string(p))
}

// Precision is what SetPrecision chose; after Build, what runs (bf16 or
// fp32).
func (d *Decoder) Precision() compute.Precision { return d.precision }

// FP32Reason says why the model runs in fp32 on an engine that computes in
// bf16 at compute.PrecisionAuto (a layer without a bf16 form, a size the
// bf16 kernels do not take); nil otherwise.
func (d *Decoder) FP32Reason() error { return d.fp32Why }

// BuildReport says what runs after Build (BuildReporter): the bf16 plans,
// or a warning when the model runs in fp32 on an engine that computes in
// bf16, and why.
func (d *Decoder) BuildReport() (string, bool) {
	switch {
	case d.precision == compute.PrecisionBF16 && d.e != nil:
		return "runs in bf16 (fp32 master weights, gradients and accumulation) through per-layer plans: " + d.notes.String(), false
	case d.fp32Why != nil:
		return fmt.Sprintf("runs in fp32 on the engine's per-layer operations, not in bf16 (much slower): %v", d.fp32Why), true
	}
	return "", false
}

// choosePrecision decides, before the layers build, whether the model runs
// in bf16 on e: where the precision asks for it or is auto, and every part
// of the model has a bf16 form at its sizes. It sets d.precision to the
// choice (and d.fp32Why at auto when the engine computes in bf16 but not
// this model). RecomputeGELU on a model that would run in bf16 is an
// error that says to use RecomputeBlock or fp32.
func (d *Decoder) choosePrecision(e compute.Engine, params, grads []compute.Tensor, rows int, declared [][]ParamSpec, uses [][]paramUse) error {
	if d.precision == compute.PrecisionF32 {
		return nil
	}
	probe := d
	if d.recompute == RecomputeGELU {
		// the layers without the shared hidden activation, which has no
		// bf16 form: would the model run in bf16?
		plain, err := NewDecoder(d.name, d.spec)
		if err != nil {
			return err
		}
		probe, declared = plain, plain.declared()
		if uses, err = resolveTies(declared); err != nil {
			return err
		}
	}
	err := probe.checkBF16(e, params, grads, rows, declared, uses)
	switch {
	case err == nil && d.recompute == RecomputeGELU:
		p := "auto"
		if d.precision != compute.PrecisionAuto {
			p = string(d.precision)
		}
		return fmt.Errorf("recompute gelu has no bf16 form (a bf16 MLP computes its GELU in its first GEMM): at precision %s engine %s runs the model in bf16; use recompute block, or precision fp32",
			p, e.Name())
	case err == nil:
		d.precision = compute.PrecisionBF16
	case d.precision == compute.PrecisionBF16:
		return fmt.Errorf("precision bf16: %w", err)
	default:
		if !errNoBF16(err) {
			d.fp32Why = err
		}
		d.precision = compute.PrecisionF32
	}
	return nil
}

// checkBF16 asks the engine about every part of the model in bf16: the
// embedding, the loss, each layer (through its checkBF16), in that order.
func (d *Decoder) checkBF16(e compute.Engine, params, grads []compute.Tensor, rows int, declared [][]ParamSpec, uses [][]paramUse) error {
	s, bt := d.spec, rows*d.spec.Context
	if _, ok := e.(compute.BF16Tensors); !ok {
		return &compute.MissingOpError{Engine: e.Name(), Op: "bf16 tensors", Group: "BF16Tensors"}
	}
	if _, err := compute.Require[compute.Embeddings](e, "bf16 embedding"); err != nil {
		return err
	}
	if err := compute.CheckBF16(e, compute.EmbeddingSpec{B: rows, T: s.Context, C: s.Width, Vocab: s.Vocab, DType: compute.BF16}); err != nil {
		return err
	}
	check := func(i int, l Layer) error {
		b, _ := layerBuild(Build{Engine: e, Batch: bt, In: []int{s.Width}, NeedInputGrad: true, bf16: true}, declared[i+1], uses[i+1], params, grads)
		_, err := checkBF16Layer(l, b)
		return err
	}
	for i, l := range d.blocks {
		if err := check(i, l); err != nil {
			return err
		}
	}
	// the loss before the head, whose width is the vocabulary: its refusal
	// says what to do about it
	if _, err := compute.Require[compute.CrossEntropies](e, "bf16 cross-entropy"); err != nil {
		return err
	}
	if err := compute.CheckBF16(e, compute.CrossEntropySpec{Rows: bt, Classes: s.Vocab, DType: compute.BF16}); err != nil {
		return err
	}
	if err := check(len(d.blocks), d.norm); err != nil {
		return err
	}
	return check(len(d.blocks)+1, d.head)
}

// layers are the blocks, the final norm and the head, in forward order.
func (d *Decoder) layers() []Layer {
	return append(append([]Layer(nil), d.blocks...), d.norm, d.head)
}

// bf16Decoder is what a Decoder built in bf16 holds beyond the layers.
type bf16Decoder struct {
	masters compute.Masters
	embed   compute.EmbeddingPlan
	loss    compute.CrossEntropyPlan
}

// buildBF16 builds the model in bf16 (see the top of the file): the
// masters' copy, the embedding plan, the layers over the copies, the loss.
func (d *Decoder) buildBF16(e compute.Engine, params, grads []compute.Tensor, rows int, declared [][]ParamSpec, uses [][]paramUse) error {
	s, bt := d.spec, rows*d.spec.Context
	bt16 := e.(compute.BF16Tensors)
	masters, err := bt16.BF16Masters(params)
	if err != nil {
		return err
	}
	half := masters.Views()
	d.notes = &bf16Notes{}
	emb, _ := compute.Require[compute.Embeddings](e, "bf16 embedding")
	es := compute.EmbeddingSpec{B: rows, T: s.Context, C: s.Width, Vocab: s.Vocab, DType: compute.BF16,
		Tokens: half[0], DTokens: grads[0], AddTokens: uses[0][0].add}
	if s.Positions != "" {
		es.Positions, es.DPositions = half[1], grads[1]
	}
	embed, err := emb.Embedding(es)
	if err != nil {
		return err
	}
	layers := d.layers()
	d.first = make([]int, len(layers))
	next := len(declared[0])
	pool := &gradPool{}
	for i, l := range layers {
		b, n := layerBuild(Build{Engine: e, Batch: bt, In: []int{s.Width}, NeedInputGrad: true, bf16: true, notes: d.notes}, declared[i+1], uses[i+1], params, grads)
		if i < len(d.blocks) {
			b.grads = pool.part()
		}
		for _, u := range uses[i+1] {
			b.half = append(b.half, half[u.index])
		}
		d.first[i], next = next, next+n
		if _, err := l.Build(b); err != nil {
			return err
		}
	}
	ce, _ := compute.Require[compute.CrossEntropies](e, "bf16 cross-entropy")
	loss, err := ce.CrossEntropy(compute.CrossEntropySpec{Rows: bt, Classes: s.Vocab, DType: compute.BF16})
	if err != nil {
		return err
	}
	d.notes.items = append(d.notes.items, loss.Path())
	d.bf = &bf16Decoder{masters: masters, embed: embed, loss: loss}
	d.x0 = bt16.AllocBF16(bt, s.Width)
	return nil
}
