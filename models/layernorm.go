package models

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// LayerNorm normalises each row over its last C features and applies a
// gain and a bias: y = (x-mean)/sqrt(var+eps)·w + b, with w and b (C). It
// needs the engine's compute.Norms.
type LayerNorm struct {
	name string
	c    int
	eps  float32

	norms        compute.Norms
	w, b, dw, db compute.Tensor
	x, y, dx     compute.Tensor // x, y, dx are (rows, C)
	mean, rstd   compute.Tensor // (rows)
	needInGrad   bool
	rows         int
}

var _ Layer = (*LayerNorm)(nil)

// NewLayerNorm returns a layer norm over c features with parameters
// name+".weight" (ones) and name+".bias" (zeros), both exempt from weight
// decay; eps is GPT-2's 1e-5.
func NewLayerNorm(name string, c int) *LayerNorm {
	if c <= 0 {
		panic(fmt.Sprintf("models: NewLayerNorm(%q, %d): width must be positive", name, c))
	}
	return &LayerNorm{name: name, c: c, eps: 1e-5}
}

// Params declares w (C) and b (C).
func (l *LayerNorm) Params() []ParamSpec {
	return []ParamSpec{
		{Name: l.name + ".weight", Shape: []int{l.c}, Init: Ones, NoDecay: true},
		{Name: l.name + ".bias", Shape: []int{l.c}, Init: Zeros, NoDecay: true},
	}
}

// Build asks the engine for compute.Norms and allocates y, dx (rows, C) and
// the rows' statistics. rows is the batch times the product of the input's
// leading dimensions.
func (l *LayerNorm) Build(b Build) ([]int, error) {
	if err := checkViews(l.name, l.Params(), b.Params, b.Grads); err != nil {
		return nil, err
	}
	if len(b.In) == 0 || b.In[len(b.In)-1] != l.c {
		return nil, fmt.Errorf("%s: input of shape %v, want %d features last", l.name, b.In, l.c)
	}
	if b.AddGrad(0) || b.AddGrad(1) {
		return nil, fmt.Errorf("%s: a layer norm's parameters cannot be tied", l.name)
	}
	n, err := compute.Require[compute.Norms](b.Engine, "layer norm")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	l.norms = n
	l.rows = b.Batch * size(b.In) / l.c
	l.w, l.b, l.dw, l.db = b.Params[0], b.Params[1], b.Grads[0], b.Grads[1]
	l.y = b.Alloc(l.rows, l.c)
	l.mean, l.rstd = b.Alloc(l.rows), b.Alloc(l.rows)
	l.needInGrad = b.NeedInputGrad
	l.dx = b.Alloc(l.rows, l.c) // also without NeedInputGrad: the kernel writes it
	return b.In, nil
}

// Forward normalises x (rows, C) into y, keeping x and the statistics.
func (l *LayerNorm) Forward(x compute.Tensor) compute.Tensor {
	l.x = x
	l.norms.LayerNorm(l.y, l.mean, l.rstd, x, l.w, l.b, l.eps)
	return l.y
}

// Backward writes dw, db and returns dx (rows, C).
func (l *LayerNorm) Backward(dy compute.Tensor) compute.Tensor {
	l.norms.LayerNormBackward(l.dx, l.dw, l.db, dy, l.x, l.w, l.mean, l.rstd, false)
	if !l.needInGrad {
		return nil
	}
	return l.dx
}

// GELU is the GELU activation (GPT-2's tanh approximation) as a layer; it
// needs the engine's compute.GELUs.
type GELU struct {
	gelu compute.GELUs
	x, y compute.Tensor
}

var _ Layer = (*GELU)(nil)

// NewGELU returns a GELU layer.
func NewGELU() *GELU { return &GELU{} }

// Params is empty.
func (g *GELU) Params() []ParamSpec { return nil }

// Build asks the engine for compute.GELUs and allocates y.
func (g *GELU) Build(b Build) ([]int, error) {
	f, err := compute.Require[compute.GELUs](b.Engine, "GELU")
	if err != nil {
		return nil, err
	}
	g.gelu = f
	g.y = b.Alloc(append([]int{b.Batch}, b.In...)...)
	return b.In, nil
}

// Forward computes y = gelu(x), keeping x.
func (g *GELU) Forward(x compute.Tensor) compute.Tensor {
	g.x = x
	g.gelu.GELU(g.y, x)
	return g.y
}

// Backward turns dy into dx = dy·gelu'(x) in place and returns it.
func (g *GELU) Backward(dy compute.Tensor) compute.Tensor {
	g.gelu.GELUBackward(dy, dy, g.x)
	return dy
}
