package optim

import (
	"fmt"

	"github.com/symddp/symddp/internal/hostloops"
)

// SGDConfig configures SGD. Its zero value is PyTorch's default: plain SGD
// without momentum or weight decay.
type SGDConfig struct {
	// Momentum μ ≥ 0; 0 turns momentum off.
	Momentum float32
	// Nesterov uses Nesterov momentum; it needs Momentum > 0.
	Nesterov bool
	// WeightDecay ≥ 0 is the L2 coefficient added to the gradient.
	WeightDecay float32
}

// SGD is stochastic gradient descent with optional heavy-ball momentum
// (Polyak, 1964, "Some methods of speeding up the convergence of iteration
// methods") or Nesterov momentum in the form of Sutskever et al. (2013, "On
// the importance of initialization and momentum in deep learning"), as
// torch.optim.SGD with dampening 0.
//
// Per element, with p the parameter, g the gradient and buf the momentum slot,
// in float32, each operation rounded to nearest and in this order:
//
//	g   = g + float32(wd·p)        if wd ≠ 0
//	buf = g                        step 1        (μ > 0)
//	buf = float32(μ·buf) + g       step > 1      (μ > 0)
//	d   = g + float32(μ·buf)       Nesterov
//	d   = buf                      momentum without Nesterov
//	d   = g                        μ = 0
//	p   = p − float32(lr·d)
//
// The state is one slot, "momentum" (buf), when μ > 0, none otherwise.
type SGD struct {
	c SGDConfig
}

// NewSGD validates c and returns the optimizer.
func NewSGD(c SGDConfig) (*SGD, error) {
	if err := firstErr(nonNegative("sgd", "momentum", c.Momentum),
		nonNegative("sgd", "weight decay", c.WeightDecay)); err != nil {
		return nil, err
	}
	if c.Nesterov && c.Momentum == 0 {
		return nil, fmt.Errorf("optim: sgd: nesterov needs momentum > 0")
	}
	return &SGD{c: c}, nil
}

// Name returns "sgd".
func (o *SGD) Name() string { return "sgd" }

// Slots returns 1 with momentum, 0 without.
func (o *SGD) Slots() int {
	if o.c.Momentum == 0 {
		return 0
	}
	return 1
}

// StateNames returns ["momentum"] with momentum, nothing without.
func (o *SGD) StateNames() []string {
	if o.c.Momentum == 0 {
		return nil
	}
	return []string{"momentum"}
}

// Hyper returns Kind "sgd" with Momentum, Nesterov and WeightDecay.
func (o *SGD) Hyper() Hyper {
	return Hyper{Kind: "sgd", Config: Config{
		Momentum: o.c.Momentum, Nesterov: o.c.Nesterov, WeightDecay: o.c.WeightDecay}}
}

// Update applies one SGD step; see the type's doc comment.
func (o *SGD) Update(params, grads []float32, state [][]float32, step int, lr float32) {
	checkUpdate("sgd", o.Slots(), params, grads, state, step, lr)
	if o.c.Momentum == 0 {
		hostloops.SGD(params, grads, lr, o.c.WeightDecay)
		return
	}
	hostloops.SGDMomentum(params, grads, state[0], lr, o.c.WeightDecay, o.c.Momentum, o.c.Nesterov, step == 1)
}
