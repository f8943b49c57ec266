package models

import "github.com/symddp/symddp/compute"

// ReLU is the layer y = max(x, 0), for compositions where the activation
// stands on its own; Linear fuses it when it directly follows.
type ReLU struct {
	e          compute.Engine
	y          compute.Tensor
	needInGrad bool
}

// NewReLU returns a ReLU layer.
func NewReLU() *ReLU { return &ReLU{} }

// Params is empty: ReLU has no parameters.
func (r *ReLU) Params() []ParamSpec { return nil }

// Build allocates y (Batch, In...); the output has the input's shape.
func (r *ReLU) Build(b Build) ([]int, error) {
	if err := checkViews("relu", nil, b.Params, b.Grads); err != nil {
		return nil, err
	}
	r.e, r.needInGrad = b.Engine, b.NeedInputGrad
	r.y = b.Alloc(append([]int{b.Batch}, b.In...)...)
	return append([]int(nil), b.In...), nil
}

// Forward computes y = max(x, 0); x and y are (B, In...).
func (r *ReLU) Forward(x compute.Tensor) compute.Tensor {
	r.e.Copy(r.y, x)
	r.e.BiasAct(r.y, nil, compute.ReLU)
	return r.y
}

// Backward zeroes dy (B, In...) where the output was 0, in place, and
// returns it as the input gradient.
func (r *ReLU) Backward(dy compute.Tensor) compute.Tensor {
	if !r.needInGrad {
		return nil
	}
	r.e.BiasActBackward(dy, r.y, nil, compute.ReLU, false)
	return dy
}
