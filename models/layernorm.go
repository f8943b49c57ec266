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
	if b.bf16 {
		return b.In, l.buildBF16(b)
	}
	l.rows = b.Batch * size(b.In) / l.c
	l.w, l.b, l.dw, l.db = b.Params[0], b.Params[1], b.Grads[0], b.Grads[1]
	l.y = b.Alloc(l.rows, l.c)
	l.mean, l.rstd = b.Alloc(l.rows), b.Alloc(l.rows)
	l.needInGrad = b.NeedInputGrad
	l.dx = nil
	if !b.into { // also without NeedInputGrad: the kernel writes it
		l.dx = b.Alloc(l.rows, l.c)
	}
	return b.In, nil
}

// normSpec is the layer's sizes as the engine's bf16 check sees them.
func (l *LayerNorm) normSpec(b Build) compute.NormSpec {
	return compute.NormSpec{Rows: b.Batch * size(b.In) / l.c, Cols: l.c, Eps: l.eps}
}

// checkBF16 asks the engine whether it runs the layer in bf16 (bf16Layer).
func (l *LayerNorm) checkBF16(b Build) ([]int, error) {
	if len(b.In) == 0 || b.In[len(b.In)-1] != l.c {
		return nil, fmt.Errorf("%s: input of shape %v, want %d features last", l.name, b.In, l.c)
	}
	if _, err := compute.Require[compute.Norms](b.Engine, "layer norm"); err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	if err := compute.CheckBF16(b.Engine, l.normSpec(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	return b.In, nil
}

// buildBF16 readies the engine for the layer in bf16 (the engine's Norms
// on bf16 tensors) and allocates y (bf16), the statistics (fp32) and, when
// the layer does not begin a residual block, dx (bf16).
func (l *LayerNorm) buildBF16(b Build) error {
	half, err := b.bf16Views(l.name, 2)
	if err != nil {
		return err
	}
	if err := b.Engine.(compute.BF16Tensors).PrepareBF16(l.normSpec(b)); err != nil {
		return fmt.Errorf("%s: %w", l.name, err)
	}
	l.rows = b.Batch * size(b.In) / l.c
	l.w, l.b, l.dw, l.db = half[0], half[1], b.Grads[0], b.Grads[1]
	l.y = b.allocBF16(size(b.In))
	l.mean, l.rstd = b.Alloc(l.rows), b.Alloc(l.rows)
	l.needInGrad, l.dx = b.NeedInputGrad, nil
	if !b.into {
		l.dx = b.allocGradBF16(size(b.In))
	}
	return nil
}

// backwardOnto writes dw, db and adds the gradient at x into stream, the
// residual stream's gradient (streamIn: a bf16 layer built to begin a
// residual block).
func (l *LayerNorm) backwardOnto(dy, stream compute.Tensor) {
	l.norms.LayerNormBackward(stream, l.dw, l.db, dy, l.x, l.w, l.mean, l.rstd, true)
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
