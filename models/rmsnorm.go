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
	l.norms = n
	if b.bf16 {
		return b.In, l.buildBF16(b, rows)
	}
	l.w, l.dw = b.Params[0], b.Grads[0]
	l.y, l.dx, l.rstd = b.Alloc(rows, l.c), nil, b.Alloc(rows)
	if !b.into { // also without NeedInputGrad: the kernel writes it
		l.dx = b.Alloc(rows, l.c)
	}
	l.needInGrad = b.NeedInputGrad
	return b.In, nil
}

// spec is the layer's sizes as the engine's bf16 check sees them.
func (l *RMSNorm) spec(b Build) compute.RMSNormSpec {
	return compute.RMSNormSpec{Rows: b.Batch * size(b.In) / l.c, Cols: l.c, Eps: l.eps}
}

// checkBF16 asks the engine whether it runs the layer in bf16 (bf16Layer).
func (l *RMSNorm) checkBF16(b Build) ([]int, error) {
	if len(b.In) == 0 || b.In[len(b.In)-1] != l.c {
		return nil, fmt.Errorf("%s: input of shape %v, want %d features last", l.name, b.In, l.c)
	}
	if _, err := compute.Require[compute.RMSNorms](b.Engine, "RMSNorm"); err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	if err := compute.CheckBF16(b.Engine, l.spec(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	return b.In, nil
}

// buildBF16 binds the weight's bf16 copy and allocates y (bf16), rstd
// (fp32) and, when the layer does not begin a residual block, dx (bf16).
func (l *RMSNorm) buildBF16(b Build, rows int) error {
	half, err := b.bf16Views(l.name, 1)
	if err != nil {
		return err
	}
	if err := compute.CheckBF16(b.Engine, l.spec(b)); err != nil {
		return fmt.Errorf("%s: %w", l.name, err)
	}
	l.w, l.dw = half[0], b.Grads[0]
	l.y, l.rstd = b.allocBF16(size(b.In)), b.Alloc(rows)
	l.needInGrad, l.dx = b.NeedInputGrad, nil
	if !b.into {
		l.dx = b.allocGradBF16(size(b.In))
	}
	return nil
}

// backwardOnto writes dw and adds the gradient at x into stream, the
// residual stream's gradient (streamIn: a bf16 layer built to begin a
// residual block).
func (l *RMSNorm) backwardOnto(dy, stream compute.Tensor) {
	l.norms.RMSNormBackward(stream, l.dw, dy, l.x, l.w, l.rstd, true)
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
