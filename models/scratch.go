package models

import (
	"fmt"
	"slices"

	"github.com/symddp/symddp/compute"
)

// ScratchPool is activation memory that parts of a model share because
// they never need it at the same time: the blocks of a model whose
// activations are recomputed in backward ([Checkpoint]), or the hidden
// activation of every MLP that recomputes it ([GELUMLP.SharedHidden],
// [SwiGLUMLP.SharedHidden]). Each part allocates through its own [Scratch]
// (a layer does through [Build.Alloc]); the pool hands every part the same
// tensors, matched by shape, so that L parts of the same layers take the
// memory of one.
//
// A pool serves one engine and one build; parts of it must not be live at
// once (a Checkpoint inside a Checkpoint needs a pool of its own).
type ScratchPool struct {
	e     compute.Engine
	slots []scratchSlot
	plans []scratchPlan
	grads map[string]*[2]compute.Tensor // the checkpoints' alternating input gradients, by shape
	parts int                           // checkpoints built on the pool, in forward order
}

// scratchSlot is one shared tensor.
type scratchSlot struct {
	dtype compute.DType
	shape []int
	t     compute.Tensor
}

// scratchPlan is one shared plan of an engine's operation (attention's,
// which holds its probabilities), made for the key.
type scratchPlan struct {
	key  any
	plan any
}

// NewScratchPool returns an empty pool; its memory is allocated as the
// parts that use it are built.
func NewScratchPool() *ScratchPool { return &ScratchPool{} }

// bind makes e the pool's engine, or fails when it has another.
func (p *ScratchPool) bind(e compute.Engine) error {
	if p.e == nil {
		p.e = e
		return nil
	}
	if p.e != e {
		return fmt.Errorf("a scratch pool of engine %s used on engine %s: a pool serves one build", p.e.Name(), e.Name())
	}
	return nil
}

// holds says whether t is one of the pool's tensors.
func (p *ScratchPool) holds(t compute.Tensor) bool {
	for _, sl := range p.slots {
		if sl.t == t {
			return true
		}
	}
	return false
}

// Scratch returns a new part's allocator.
func (p *ScratchPool) Scratch() *Scratch { return &Scratch{pool: p} }

// inputGrad is the input gradient of the pool's checkpoint number part,
// of the given shape: two tensors per shape, taken in turn by consecutive
// checkpoints, so that a checkpoint's input gradient is never the one it
// receives from the checkpoint after it.
func (p *ScratchPool) inputGrad(e compute.Engine, part int, shape []int) compute.Tensor {
	if p.grads == nil {
		p.grads = map[string]*[2]compute.Tensor{}
	}
	key := fmt.Sprint(shape)
	pair := p.grads[key]
	if pair == nil {
		pair = new([2]compute.Tensor)
		p.grads[key] = pair
	}
	if pair[part%2] == nil {
		pair[part%2] = e.Alloc(shape...)
	}
	return pair[part%2]
}

// Scratch allocates one part's activations from a [ScratchPool]: the
// tensors it returns are distinct from each other, and the same ones (by
// shape) that the pool's other parts get. Its memory is the part's only
// while the part runs: another part's Forward overwrites it.
type Scratch struct {
	pool  *ScratchPool
	taken []bool // by slot of the pool: this part holds it
	plans []bool // by plan of the pool
}

// Alloc returns a tensor of shape from the pool: a slot of that shape that
// this part does not hold yet, or a new one. Like Engine.Alloc it is for
// build time; unlike it, the tensor holds whatever the pool's last user
// left there, so a layer must write its scratch before reading it.
func (s *Scratch) Alloc(e compute.Engine, shape ...int) compute.Tensor {
	return s.alloc(e, compute.F32, shape)
}

// alloc is Alloc of a tensor of dtype (F32, or BF16 on an engine with
// compute.BF16Tensors): slots match by type and shape.
func (s *Scratch) alloc(e compute.Engine, dtype compute.DType, shape []int) compute.Tensor {
	p := s.pool
	if err := p.bind(e); err != nil {
		panic("models: " + err.Error())
	}
	s.taken = append(s.taken, make([]bool, len(p.slots)-len(s.taken))...)
	for i, sl := range p.slots {
		if !s.taken[i] && sl.dtype == dtype && slices.Equal(sl.shape, shape) {
			s.taken[i] = true
			return sl.t
		}
	}
	var t compute.Tensor
	if dtype == compute.BF16 {
		t = e.(compute.BF16Tensors).AllocBF16(shape...)
	} else {
		t = e.Alloc(shape...)
	}
	p.slots = append(p.slots, scratchSlot{dtype: dtype, shape: slices.Clone(shape), t: t})
	s.taken = append(s.taken, true)
	return t
}

// plan is SharedPlan's lookup in the pool: a plan made for an equal key
// that this part does not hold yet, or a new one from newPlan.
func plan[P any](s *Scratch, e compute.Engine, key any, newPlan func() (P, error)) (P, error) {
	p := s.pool
	var none P
	if err := p.bind(e); err != nil {
		return none, err
	}
	s.plans = append(s.plans, make([]bool, len(p.plans)-len(s.plans))...)
	for i, sp := range p.plans {
		if pl, ok := sp.plan.(P); ok && !s.plans[i] && sp.key == key {
			s.plans[i] = true
			return pl, nil
		}
	}
	pl, err := newPlan()
	if err != nil {
		return none, err
	}
	p.plans = append(p.plans, scratchPlan{key: key, plan: pl})
	s.plans = append(s.plans, true)
	return pl, nil
}

// Alloc allocates one of the layer's activations of shape: from Scratch
// when it is set (memory that the other parts of a ScratchPool share, as
// inside a Checkpoint), from the engine otherwise. Layers allocate their
// activations with it, so that they share memory wherever they are built
// to; a layer that calls Engine.Alloc itself keeps memory of its own,
// which is right but saves nothing.
func (b Build) Alloc(shape ...int) compute.Tensor {
	if b.Scratch != nil {
		return b.Scratch.Alloc(b.Engine, shape...)
	}
	return b.Engine.Alloc(shape...)
}

// SharedPlan returns the plan of an engine's operation that a layer keeps
// activations in (attention's probabilities): made by newPlan, or, when b
// has a Scratch, the one another part of the pool made for an equal key
// (a comparable value, such as the operation's spec) and this part does
// not hold yet. Plans without activations (a rotary table) may be shared
// the same way.
func SharedPlan[P any](b Build, key any, newPlan func() (P, error)) (P, error) {
	if b.Scratch == nil {
		return newPlan()
	}
	return plan(b.Scratch, b.Engine, key, newPlan)
}

// part is the Build of a layer inside a composite one (a residual block, a
// checkpoint, an MLP): b's engine, batch and scratch, input shape in, the
// parameters [lo, hi) of b's, and whether it needs its input gradient.
func (b Build) part(in []int, lo, hi int, needInGrad bool) Build {
	p := Build{Engine: b.Engine, Batch: b.Batch, Scratch: b.Scratch, In: in, NeedInputGrad: needInGrad,
		Params: b.Params[lo:hi], Grads: b.Grads[lo:hi], bf16: b.bf16, grads: b.grads, notes: b.notes}
	if b.AddGrads != nil {
		p.AddGrads = b.AddGrads[lo:hi]
	}
	if b.half != nil {
		p.half = b.half[lo:hi]
	}
	return p
}
