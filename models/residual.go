package models

import (
	"errors"
	"fmt"

	"github.com/symddp/symddp/compute"
)

// Residual is a residual block: y = x + f(x), where f is its layers applied
// one after another and gives outputs of x's shape. Its parameters are its
// layers', in order; Backward sends the output's gradient both around the
// block (the identity) and through the layers, and sums the two.
type Residual struct {
	name   string
	layers []Layer

	e          compute.Engine
	y, dx      compute.Tensor // output and input gradient (Batch, In...); none in bf16
	needInGrad bool
	bf16       bool     // built in bf16: the stream and its gradient in place
	in         streamIn // in fp32, the first layer when it adds its input gradient into dx itself
	onto       bool     // in fp32, y is the last layer's output, x added onto it (streamEnd)
	inPlace    bool     // in fp32 with in and onto: dx is dy, updated in place
}

var _ Layer = (*Residual)(nil)

// NewResidual returns the residual block x + layers(x).
func NewResidual(name string, layers ...Layer) *Residual {
	return &Residual{name: name, layers: layers}
}

// Layers are the block's layers, first to last.
func (r *Residual) Layers() []Layer { return r.layers }

// Params declares the layers' parameters, layer by layer (tied uses
// included: the model resolves them).
func (r *Residual) Params() []ParamSpec {
	var specs []ParamSpec
	for _, l := range r.layers {
		specs = append(specs, l.Params()...)
	}
	return specs
}

// Build builds the layers on b's input shape, checks that they give that
// shape back, and allocates y and, when needed, dx.
func (r *Residual) Build(b Build) ([]int, error) {
	if len(r.layers) == 0 {
		return nil, errors.New(r.name + ": a residual block without layers")
	}
	n := len(r.Params())
	if len(b.Params) != n || len(b.Grads) != n {
		return nil, fmt.Errorf("%s: got %d parameter and %d gradient views, want %d of each", r.name, len(b.Params), len(b.Grads), n)
	}
	if b.bf16 {
		if err := r.checkEnds(); err != nil {
			return nil, err
		}
	}
	shape, next := b.In, 0
	for i, l := range r.layers {
		k := len(l.Params())
		// The first layer's input gradient is the block's, less the
		// identity's share: needed exactly when the block's is.
		out, err := l.Build(r.part(b, shape, i, next, next+k))
		if err != nil {
			return nil, fmt.Errorf("%s: layer %d: %w", r.name, i, err)
		}
		shape, next = out, next+k
	}
	if size(shape) != size(b.In) {
		return nil, fmt.Errorf("%s: its layers turn inputs of shape %v into %v; a residual block must keep the shape", r.name, b.In, shape)
	}
	r.e, r.needInGrad, r.bf16, r.in = b.Engine, b.NeedInputGrad, b.bf16, nil
	if r.bf16 { // the stream and its gradient are updated in place: nothing of the block's own
		r.y, r.dx = nil, nil
		return b.In, nil
	}
	end, ok := r.layers[len(r.layers)-1].(streamEnd)
	r.onto = ok && end.endsStream()
	if r.addsIn(b) {
		r.in = r.layers[0].(streamIn)
	}
	r.inPlace = r.in != nil && r.onto
	full := append([]int{b.Batch}, b.In...)
	r.y, r.dx = nil, nil
	if !r.onto {
		r.y = b.Alloc(full...)
	}
	if r.needInGrad && !r.inPlace {
		r.dx = b.Alloc(full...)
	}
	return b.In, nil
}

// part is layer i's Build: in bf16 the first layer begins the residual
// stream's gradient and the last ends the stream (in memory of its own
// when the block's output is kept: b.keep); in fp32 the first layer adds
// its input gradient into the block's when it can (addsIn).
func (r *Residual) part(b Build, in []int, i, lo, hi int) Build {
	p := b.part(in, lo, hi, i > 0 || b.NeedInputGrad)
	if b.bf16 {
		p.into, p.onto = i == 0, i == len(r.layers)-1
		p.keep = p.onto && b.keep
	} else {
		p.into = i == 0 && r.addsIn(b)
	}
	return p
}

// addsIn says whether, in fp32, the block's first layer adds its input
// gradient into the block's (dx = dy + f'(x)ᵀ·dy, the sum in the layer's
// last write) instead of writing its own for the block to add: when the
// block has an input gradient and the layer can (streamIn: LayerNorm,
// RMSNorm). The sum is the same float32 add either way, so the same bits;
// it saves a pass over the block's gradient and the layer's own dx.
func (r *Residual) addsIn(b Build) bool {
	if b.bf16 || !b.NeedInputGrad || len(r.layers) < 2 {
		return false
	}
	_, ok := r.layers[0].(streamIn)
	return ok
}

// checkEnds checks that the block's first layer can add its input
// gradient into the stream's and its last write onto the stream, as the
// block needs in bf16.
func (r *Residual) checkEnds() error {
	if len(r.layers) < 2 {
		return fmt.Errorf("%s: a bf16 residual block needs at least two layers (a norm first)", r.name)
	}
	if _, ok := r.layers[0].(streamIn); !ok {
		return fmt.Errorf("%s: its first layer %T cannot add its input gradient into the residual stream's in bf16 (a LayerNorm or RMSNorm can)", r.name, r.layers[0])
	}
	if _, ok := r.layers[len(r.layers)-1].(streamOut); !ok {
		return fmt.Errorf("%s: its last layer %T cannot write onto the residual stream in bf16 (a Linear, GELUMLP, SwiGLUMLP or GroupedSelfAttention can)", r.name, r.layers[len(r.layers)-1])
	}
	return nil
}

// checkBF16 checks the block's ends and asks every layer (bf16Layer).
func (r *Residual) checkBF16(b Build) ([]int, error) {
	if len(r.layers) == 0 {
		return nil, errors.New(r.name + ": a residual block without layers")
	}
	shape, next := b.In, 0
	for i, l := range r.layers {
		k := len(l.Params())
		out, err := checkBF16Layer(l, r.part(b, shape, i, next, next+k))
		if err != nil {
			return nil, fmt.Errorf("%s: layer %d: %w", r.name, i, err)
		}
		shape, next = out, next+k
	}
	return b.In, r.checkEnds()
}

// Forward computes y = x + f(x); in bf16 the last layer writes it onto x
// in its GEMM; in fp32 x is added onto the last layer's output where that
// layer ends streams (streamEnd), else into y of the block's own.
func (r *Residual) Forward(x compute.Tensor) compute.Tensor {
	if r.bf16 {
		h, last := x, len(r.layers)-1
		for _, l := range r.layers[:last] {
			h = l.Forward(h)
		}
		return r.layers[last].(streamOut).forwardOnto(h, x)
	}
	h := x
	for _, l := range r.layers {
		h = l.Forward(h)
	}
	if r.onto { // h + x is x + h, bit for bit
		r.e.Accumulate(h, x)
		return h
	}
	r.e.Copy(r.y, x)
	r.e.Accumulate(r.y, h)
	return r.y
}

// Backward returns dx = dy + f'(x)ᵀ·dy and writes the layers' parameter
// gradients. dy is copied first, as the layers may overwrite it, unless
// the last layer keeps it (streamEnd) and the first adds into it
// (addsIn): then dx is dy, updated in place, as in bf16.
func (r *Residual) Backward(dy compute.Tensor) compute.Tensor {
	if r.bf16 {
		// dy is the stream's gradient: the layers read it, and the first
		// adds its input gradient into it, in place
		d := dy
		for i := len(r.layers) - 1; i >= 1; i-- {
			d = r.layers[i].Backward(d)
		}
		r.layers[0].(streamIn).backwardOnto(d, dy)
		if !r.needInGrad {
			return nil
		}
		return dy
	}
	if r.inPlace {
		d := dy
		for i := len(r.layers) - 1; i >= 1; i-- {
			d = r.layers[i].Backward(d)
		}
		r.in.backwardOnto(d, dy)
		return dy
	}
	if r.needInGrad {
		r.e.Copy(r.dx, dy)
	}
	d := dy
	for i := len(r.layers) - 1; i >= 1; i-- {
		d = r.layers[i].Backward(d)
	}
	if r.in != nil { // the first layer adds its input gradient into dx
		r.in.backwardOnto(d, r.dx)
		return r.dx
	}
	d = r.layers[0].Backward(d)
	if !r.needInGrad {
		return nil
	}
	r.e.Accumulate(r.dx, d)
	return r.dx
}
