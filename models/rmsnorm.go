package models

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// RMSNorm normalises each row over its last C features by their root mean
// square and applies a gain: y = x/sqrt(mean(x²)+eps)·w, with w (C), as
// Llama normalises (no centring, no bias). It needs the engine's
// compute.RMSNorms.
type RMSNorm struct {
	name string
	c    int
	eps  float32

	norms          compute.RMSNorms
	w, dw          compute.Tensor
	x, y, dx, rstd compute.Tensor // x, y, dx are (rows, C); rstd (rows)
	needInGrad     bool
}

var _ Layer = (*RMSNorm)(nil)

// NewRMSNorm returns an RMSNorm over c features with eps (Llama: 1e-5)
// and the parameter name+".weight" (ones), exempt from weight decay.
func NewRMSNorm(name string, c int, eps float32) *RMSNorm {
	if c <= 0 || !(eps > 0) {
		panic(fmt.Sprintf("models: NewRMSNorm(%q, %d, %g): width and eps must be positive", name, c, eps))
	}
	return &RMSNorm{name: name, c: c, eps: eps}
}

// Params declares w (C).
func (l *RMSNorm) Params() []ParamSpec {
	return []ParamSpec{{Name: l.name + ".weight", Shape: []int{l.c}, Init: Ones, NoDecay: true}}
}

// Build asks the engine for compute.RMSNorms and allocates y, dx (rows, C)
// and the rows' rstd. rows is the batch times the product of the input's
// leading dimensions.
func (l *RMSNorm) Build(b Build) ([]int, error) {
	if err := checkViews(l.name, l.Params(), b.Params, b.Grads); err != nil {
		return nil, err
	}
	if len(b.In) == 0 || b.In[len(b.In)-1] != l.c {
		return nil, fmt.Errorf("%s: input of shape %v, want %d features last", l.name, b.In, l.c)
	}
	if b.AddGrad(0) {
		return nil, fmt.Errorf("%s: an RMSNorm's weight cannot be tied", l.name)
	}
	n, err := compute.Require[compute.RMSNorms](b.Engine, "RMSNorm")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	rows := b.Batch * size(b.In) / l.c
	l.norms, l.w, l.dw = n, b.Params[0], b.Grads[0]
	l.y, l.dx, l.rstd = b.Alloc(rows, l.c), b.Alloc(rows, l.c), b.Alloc(rows)
	l.needInGrad = b.NeedInputGrad
	return b.In, nil
}

// Forward normalises x (rows, C) into y, keeping x and rstd.
func (l *RMSNorm) Forward(x compute.Tensor) compute.Tensor {
	l.x = x
	l.norms.RMSNorm(l.y, l.rstd, x, l.w, l.eps)
	return l.y
}

// Backward writes dw and returns dx (rows, C).
func (l *RMSNorm) Backward(dy compute.Tensor) compute.Tensor {
	l.norms.RMSNormBackward(l.dx, l.dw, dy, l.x, l.w, l.rstd, false)
	if !l.needInGrad {
		return nil
	}
	return l.dx
}
