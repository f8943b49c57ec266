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
	y, dx      compute.Tensor // output and input gradient (Batch, In...)
	needInGrad bool
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
	shape, next := b.In, 0
	for i, l := range r.layers {
		k := len(l.Params())
		// The first layer's input gradient is the block's, less the
		// identity's share: needed exactly when the block's is.
		out, err := l.Build(b.part(shape, next, next+k, i > 0 || b.NeedInputGrad))
		if err != nil {
			return nil, fmt.Errorf("%s: layer %d: %w", r.name, i, err)
		}
		shape, next = out, next+k
	}
	if size(shape) != size(b.In) {
		return nil, fmt.Errorf("%s: its layers turn inputs of shape %v into %v; a residual block must keep the shape", r.name, b.In, shape)
	}
	r.e, r.needInGrad = b.Engine, b.NeedInputGrad
	full := append([]int{b.Batch}, b.In...)
	r.y = b.Alloc(full...)
	r.dx = nil
	if r.needInGrad {
		r.dx = b.Alloc(full...)
	}
	return b.In, nil
}

// Forward computes y = x + f(x).
func (r *Residual) Forward(x compute.Tensor) compute.Tensor {
	h := x
	for _, l := range r.layers {
		h = l.Forward(h)
	}
	r.e.Copy(r.y, x)
	r.e.Accumulate(r.y, h)
	return r.y
}

// Backward returns dx = dy + f'(x)ᵀ·dy and writes the layers' parameter
// gradients. dy is copied first: the layers may overwrite it.
func (r *Residual) Backward(dy compute.Tensor) compute.Tensor {
	if r.needInGrad {
		r.e.Copy(r.dx, dy)
	}
	d := dy
	for i := len(r.layers) - 1; i >= 0; i-- {
		d = r.layers[i].Backward(d)
	}
	if !r.needInGrad {
		return nil
	}
	r.e.Accumulate(r.dx, d)
	return r.dx
}
