package models

import (
	"errors"
	"fmt"

	"github.com/symddp/symddp/compute"
)

// Checkpoint is a block of layers whose activations are recomputed in
// backward instead of kept (activation checkpointing: torchtitan's full
// activation checkpointing of a transformer block, llm.c's recompute
// taken to the whole block). Forward runs the layers and keeps only the
// block's input (the caller's: the previous block's output) and its own
// output; the layers' activations live in the memory of a [ScratchPool]
// that every checkpoint of the pool shares, so L blocks hold one block's
// activations. Backward runs the layers' Forward again from the kept
// input, then their Backward: the same operations on the same values as
// without the checkpoint, so the gradients are the same bits, for one
// more forward of the block each step.
//
// Its parameters are its layers', in order (as a [Residual]'s). Its layers
// share memory where they allocate with [Build.Alloc] and [SharedPlan];
// they must compute the same output from the same input each time their
// Forward runs.
//
// In a bf16 build (models/bf16.go) its layers are residual blocks, whose
// stream gradient is updated in place: the last block's last layer writes
// the residual stream into memory of its own (Build.keep), which is the
// checkpoint's output, the next layer's input, kept for its recompute (one
// (Batch, In...) bf16 tensor per checkpoint, no copy), and Backward
// returns the stream's gradient as the blocks updated it.
type Checkpoint struct {
	name   string
	pool   *ScratchPool
	layers []Layer

	e          compute.Engine
	x          compute.Tensor // the last Forward's input (Batch, In...), kept by the caller
	y, dx      compute.Tensor // the block's output and input gradient (Batch, In...); none in bf16
	needInGrad bool
	bf16       bool // built in bf16: the layers' own output kept, the stream's gradient in place
}

var _ Layer = (*Checkpoint)(nil)

// NewCheckpoint returns a block of layers whose activations come from pool
// and are recomputed in backward. Give every block of a model the same
// pool; a checkpoint inside another takes a pool of its own.
func NewCheckpoint(name string, pool *ScratchPool, layers ...Layer) *Checkpoint {
	if pool == nil {
		panic(fmt.Sprintf("models: NewCheckpoint(%q) without a scratch pool", name))
	}
	return &Checkpoint{name: name, pool: pool, layers: layers}
}

// Layers are the block's layers, first to last.
func (c *Checkpoint) Layers() []Layer { return c.layers }

// Params declares the layers' parameters, layer by layer (tied uses
// included: the model resolves them).
func (c *Checkpoint) Params() []ParamSpec {
	var specs []ParamSpec
	for _, l := range c.layers {
		specs = append(specs, l.Params()...)
	}
	return specs
}

// Build builds the layers on a part of the pool, allocates the block's
// output (from b's own scratch when it has one) and, when needed, takes
// its input gradient from the pair that the pool's checkpoints alternate
// between.
func (c *Checkpoint) Build(b Build) ([]int, error) {
	if len(c.layers) == 0 {
		return nil, errors.New(c.name + ": a checkpoint without layers")
	}
	if b.Scratch != nil && b.Scratch.pool == c.pool {
		return nil, fmt.Errorf("%s: a checkpoint inside a checkpoint of the same scratch pool (give it a pool of its own)", c.name)
	}
	if err := c.pool.bind(b.Engine); err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	n := len(c.Params())
	if len(b.Params) != n || len(b.Grads) != n {
		return nil, fmt.Errorf("%s: got %d parameter and %d gradient views, want %d of each", c.name, len(b.Params), len(b.Grads), n)
	}
	if b.bf16 {
		if err := c.checkBlocks(); err != nil {
			return nil, err
		}
	}
	inner := b
	inner.Scratch = c.pool.Scratch()
	shape, next := b.In, 0
	for i, l := range c.layers {
		k := len(l.Params())
		out, err := l.Build(c.part(inner, shape, i, next, next+k))
		if err != nil {
			return nil, fmt.Errorf("%s: layer %d: %w", c.name, i, err)
		}
		shape, next = out, next+k
	}
	c.e, c.needInGrad, c.bf16 = b.Engine, b.NeedInputGrad, b.bf16
	if c.bf16 {
		c.y, c.dx = nil, nil
		c.pool.parts++
		return shape, nil
	}
	c.y = b.Alloc(append([]int{b.Batch}, shape...)...)
	c.dx = nil
	if c.needInGrad {
		c.dx = c.pool.inputGrad(b.Engine, c.pool.parts, append([]int{b.Batch}, b.In...))
	}
	c.pool.parts++
	return shape, nil
}

// part is layer i's Build inside the checkpoint (inner: b with the
// checkpoint's Scratch): in bf16 each block takes a part of its own of
// the input gradients the blocks share, and the last keeps its output.
func (c *Checkpoint) part(inner Build, in []int, i, lo, hi int) Build {
	p := inner.part(in, lo, hi, i > 0 || inner.NeedInputGrad)
	if inner.bf16 {
		p.keep = i == len(c.layers)-1
		if inner.grads != nil {
			p.grads = inner.grads.pool.part()
		}
	}
	return p
}

// checkBlocks checks that every layer is a residual block, as a
// checkpoint needs in bf16.
func (c *Checkpoint) checkBlocks() error {
	for i, l := range c.layers {
		if _, ok := l.(*Residual); !ok {
			return fmt.Errorf("%s: layer %d is a %T: in bf16 a checkpoint holds residual blocks (their stream's gradient is updated in place)", c.name, i, l)
		}
	}
	return nil
}

// checkBF16 checks the layers and asks each for its bf16 form (bf16Layer).
func (c *Checkpoint) checkBF16(b Build) ([]int, error) {
	if len(c.layers) == 0 {
		return nil, errors.New(c.name + ": a checkpoint without layers")
	}
	if err := c.checkBlocks(); err != nil {
		return nil, err
	}
	shape, next := b.In, 0
	for i, l := range c.layers {
		k := len(l.Params())
		out, err := checkBF16Layer(l, c.part(b, shape, i, next, next+k))
		if err != nil {
			return nil, fmt.Errorf("%s: layer %d: %w", c.name, i, err)
		}
		shape, next = out, next+k
	}
	return shape, nil
}

// Forward runs the layers on x, keeps x and copies their output out of the
// pool's memory into the block's own; in bf16 their output is in memory
// of its own already.
func (c *Checkpoint) Forward(x compute.Tensor) compute.Tensor {
	c.x = x
	if c.bf16 {
		y := c.forward(x)
		if c.pool.holds(y) { // a streamOut layer that does not honour Build.keep
			panic(fmt.Sprintf("models: %s: in bf16 the last block's output is in the scratch pool's memory, which the next block overwrites", c.name))
		}
		return y
	}
	c.e.Copy(c.y, c.forward(x))
	return c.y
}

// forward runs the layers on x.
func (c *Checkpoint) forward(x compute.Tensor) compute.Tensor {
	for _, l := range c.layers {
		x = l.Forward(x)
	}
	return x
}

// Backward runs the layers' Forward again from the kept input, which
// restores their activations in the pool's memory, then their Backward from
// dy, and returns the input gradient in a tensor outside the pool's
// memory: one of two that the pool's checkpoints take in turn, so that
// checkpoints run backward in the reverse of the order they were built in
// (their forward order) never overwrite the gradient they receive.
//
// In bf16 dy is the residual stream's gradient, which the blocks update in
// place, and is the input gradient it returns.
func (c *Checkpoint) Backward(dy compute.Tensor) compute.Tensor {
	c.forward(c.x)
	d := dy
	for i := len(c.layers) - 1; i >= 0; i-- {
		d = c.layers[i].Backward(d)
	}
	if !c.needInGrad {
		return nil
	}
	if c.bf16 {
		return d
	}
	c.e.Copy(c.dx, d)
	return c.dx
}
