package optim

import "github.com/symddp/symddp/internal/hostloops"

// AdamConfig configures Adam. [DefaultAdamConfig] gives PyTorch's defaults;
// the zero value is invalid (Eps must be > 0).
type AdamConfig struct {
	// Beta1 and Beta2 in [0, 1) are the decay rates of the first and
	// second moment estimates.
	Beta1, Beta2 float32
	// Eps > 0 is added to the denominator.
	Eps float32
	// WeightDecay ≥ 0 is the L2 coefficient added to the gradient (for
	// decoupled decay use AdamW).
	WeightDecay float32
}

// DefaultAdamConfig returns PyTorch's defaults: β1 0.9, β2 0.999, eps 1e-8,
// no weight decay.
func DefaultAdamConfig() AdamConfig {
	return AdamConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// Adam is Adam with bias correction (Kingma and Ba, 2015, "Adam: A Method for
// Stochastic Optimization", arXiv:1412.6980), as torch.optim.Adam without
// amsgrad.
//
// Once per step t, in float64 from the float32 hyperparameters, rounded to
// float32 ([Hyper.StepScalars]):
//
//	StepSize = float32(lr / (1 − β1^t))
//	BC2Sqrt  = float32(sqrt(1 − β2^t))
//
// and with c1 = 1 − β1 and c2 = 1 − β2 computed in float32. Then per
// element, with p the parameter, g the gradient, m and v the moment slots, in
// float32, each operation rounded to nearest and in this order:
//
//	g   = g + float32(wd·p)                    if wd ≠ 0
//	m   = float32(β1·m) + float32(c1·g)
//	v   = float32(β2·v) + float32(float32(c2·g)·g)
//	den = float32(sqrt(v)) / BC2Sqrt + eps
//	p   = p − float32(StepSize·m) / den
//
// At step 1, m and v start from 0 whatever the slots held. The state is two
// slots, "exp_avg" (m) and "exp_avg_sq" (v).
type Adam struct {
	c AdamConfig
}

// NewAdam validates c and returns the optimizer.
func NewAdam(c AdamConfig) (*Adam, error) {
	if err := checkAdam("adam", c.Beta1, c.Beta2, c.Eps, c.WeightDecay); err != nil {
		return nil, err
	}
	return &Adam{c: c}, nil
}

// checkAdam validates the hyperparameters shared by Adam and AdamW.
func checkAdam(opt string, b1, b2, eps, wd float32) error {
	return firstErr(beta(opt, "beta1", b1), beta(opt, "beta2", b2),
		positive(opt, "eps", eps), nonNegative(opt, "weight decay", wd))
}

// Name returns "adam".
func (o *Adam) Name() string { return "adam" }

// Slots returns 2.
func (o *Adam) Slots() int { return 2 }

// StateNames returns ["exp_avg", "exp_avg_sq"].
func (o *Adam) StateNames() []string { return []string{"exp_avg", "exp_avg_sq"} }

// Hyper returns Kind "adam" with Beta1, Beta2, Eps and WeightDecay.
func (o *Adam) Hyper() Hyper {
	return Hyper{Kind: "adam", Config: Config{
		Beta1: o.c.Beta1, Beta2: o.c.Beta2, Eps: o.c.Eps, WeightDecay: o.c.WeightDecay}}
}

// Update applies one Adam step; see the type's doc comment.
func (o *Adam) Update(params, grads []float32, state [][]float32, step int, lr float32) {
	checkUpdate("adam", 2, params, grads, state, step, lr)
	h := o.Hyper()
	adamUpdate(params, grads, state[0], state[1], step, h, o.c.WeightDecay, h.StepScalars(step, lr))
}

// adamUpdate is the fused loop of Adam and AdamW. Adam passes its L2 weight
// decay as l2 and s.Decay = 1 (p·1 = p exactly); AdamW passes l2 = 0 and its
// decoupled decay in s.Decay.
func adamUpdate(p, g, m, v []float32, step int, h Hyper, l2 float32, s StepScalars) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	if step == 1 {
		clear(m)
		clear(v)
	}
	hostloops.Adam(p, g, m, v, &hostloops.AdamArgs{Decay: s.Decay, L2: l2, Beta1: h.Beta1, Beta2: h.Beta2,
		C1: 1 - h.Beta1, C2: 1 - h.Beta2, Eps: h.Eps, StepSize: s.StepSize, BC2Sqrt: s.BC2Sqrt})
}
