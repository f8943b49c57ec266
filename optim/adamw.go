package optim

// AdamWConfig configures AdamW. [DefaultAdamWConfig] gives PyTorch's
// defaults; the zero value is invalid (Eps must be > 0).
type AdamWConfig struct {
	// Beta1 and Beta2 in [0, 1) are the decay rates of the first and
	// second moment estimates.
	Beta1, Beta2 float32
	// Eps > 0 is added to the denominator.
	Eps float32
	// WeightDecay ≥ 0 is the decoupled decay coefficient.
	WeightDecay float32
}

// DefaultAdamWConfig returns PyTorch's defaults: β1 0.9, β2 0.999, eps 1e-8,
// weight decay 0.01.
func DefaultAdamWConfig() AdamWConfig {
	return AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
}

// AdamW is Adam with decoupled weight decay (Loshchilov and Hutter, 2019,
// "Decoupled Weight Decay Regularization", arXiv:1711.05101), as
// torch.optim.AdamW without amsgrad.
//
// It is [Adam] without the L2 term, after first decaying the parameters:
// once per step, in float64, Decay = float32(1 − lr·wd) ([Hyper.StepScalars]),
// then per element, in float32,
//
//	p = float32(p·Decay)
//
// followed by Adam's update of m, v and p with wd = 0. The decay uses the
// step's scheduled lr, as PyTorch. The state is the same two slots as Adam's,
// "exp_avg" and "exp_avg_sq".
type AdamW struct {
	c AdamWConfig
}

// NewAdamW validates c and returns the optimizer.
func NewAdamW(c AdamWConfig) (*AdamW, error) {
	if err := checkAdam("adamw", c.Beta1, c.Beta2, c.Eps, c.WeightDecay); err != nil {
		return nil, err
	}
	return &AdamW{c: c}, nil
}

// Name returns "adamw".
func (o *AdamW) Name() string { return "adamw" }

// Slots returns 2.
func (o *AdamW) Slots() int { return 2 }

// StateNames returns ["exp_avg", "exp_avg_sq"].
func (o *AdamW) StateNames() []string { return []string{"exp_avg", "exp_avg_sq"} }

// Hyper returns Kind "adamw" with Beta1, Beta2, Eps and WeightDecay.
func (o *AdamW) Hyper() Hyper {
	return Hyper{Kind: "adamw", Config: Config{
		Beta1: o.c.Beta1, Beta2: o.c.Beta2, Eps: o.c.Eps, WeightDecay: o.c.WeightDecay}}
}

// Update applies one AdamW step; see the type's doc comment.
func (o *AdamW) Update(params, grads []float32, state [][]float32, step int, lr float32) {
	checkUpdate("adamw", 2, params, grads, state, step, lr)
	h := o.Hyper()
	adamUpdate(params, grads, state[0], state[1], step, h, 0, h.StepScalars(step, lr))
}
