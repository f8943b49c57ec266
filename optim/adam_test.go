package optim

import (
	"math"
	"testing"
)

// nan returns a NaN.
func nan() float64 { return math.NaN() }

func TestAdamHand(t *testing.T) {
	// Worked from the formulas with β1 0.9, β2 0.999, lr 0.1, from p = 1 and
	// the gradients 0.5, −0.25, 1; m̂ = m/(1 − β1^t), v̂ = v/(1 − β2^t).
	cases := []struct {
		name    string
		c       AdamConfig
		p, m, v []float64
	}{
		// t1: m 0.05, v 0.00025, m̂ 0.5, v̂ 0.25, p = 1 − 0.1·0.5/(0.5 + 1e-8).
		// t2: m 0.045 − 0.025 = 0.02, v 0.00024975 + 0.0000625 = 0.00031225,
		//     m̂ 0.02/0.19 = 0.1052632, v̂ 0.00031225/0.001999 = 0.1562031,
		//     p = 0.9 − 0.1·0.1052632/0.3952254 = 0.8733663.
		// t3: m 0.018 + 0.1 = 0.118, v 0.00031193775 + 0.001 = 0.00131193775,
		//     m̂ 0.118/0.271 = 0.4354244, v̂ 0.0013119/0.002997001 = 0.4377503,
		//     p = 0.8733663 − 0.1·0.4354244/0.6616270 = 0.8075551.
		{"plain", DefaultAdamConfig(),
			[]float64{0.900000002, 0.873366298708, 0.807555139677},
			[]float64{0.05, 0.02, 0.118}, []float64{0.00025, 0.00031225, 0.00131193775}},
		// L2: g' = g + 0.1·p. t1: g' 0.6, m 0.06, v 0.00036, p 0.9000000017.
		// t2: g' −0.25 + 0.09 = −0.16, m 0.054 − 0.016 = 0.038,
		//     v 0.00035964 + 0.0000256 = 0.00038524, p 0.8544414.
		// t3: g' 1 + 0.08544414 = 1.08544414, m 0.1427444, v 0.0015630437,
		//     p 0.7815044.
		{"wd", AdamConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1},
			[]float64{0.900000001667, 0.854441367462, 0.781504399863},
			[]float64{0.06, 0.038, 0.14274441369}, []float64{0.00036, 0.00038524, 0.00156304373394}},
		// The moments of "plain"; eps 0.01 enters outside the square root:
		// t1: p = 1 − 0.1·0.5/(0.5 + 0.01) = 0.9019608.
		{"eps", AdamConfig{Beta1: 0.9, Beta2: 0.999, Eps: 0.01},
			[]float64{0.901960784314, 0.875984336907, 0.811153053620},
			[]float64{0.05, 0.02, 0.118}, []float64{0.00025, 0.00031225, 0.00131193775}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := NewAdam(c.c)
			if err != nil {
				t.Fatal(err)
			}
			r := newRun(o, []float32{1})
			for i, g := range handGrads {
				r.step([]float32{g}, 0.1)
				near(t, "p", float64(r.p[0]), c.p[i], 1e-6)
				near(t, "exp_avg", float64(r.state[0][0]), c.m[i], 1e-7)
				// float32(0.999) is 0.99900001287: 1 − β2 is 1.3e-5 off,
				// relatively, and so is v.
				near(t, "exp_avg_sq", float64(r.state[1][0]), c.v[i], 2e-5*c.v[i])
			}
		})
	}
}

func TestAdamState(t *testing.T) {
	o, _ := NewAdam(DefaultAdamConfig())
	names := o.StateNames()
	if o.Slots() != 2 || len(names) != 2 || names[0] != "exp_avg" || names[1] != "exp_avg_sq" {
		t.Errorf("adam: %d slots %q, want 2 [exp_avg exp_avg_sq]", o.Slots(), names)
	}
}

func TestStepScalars(t *testing.T) {
	// Betas exact in float32, so that the values are exact too.
	h := Hyper{Kind: "adamw", Config: Config{Beta1: 0.5, Beta2: 0.75, Eps: 1e-8, WeightDecay: 0.01}}
	s := h.StepScalars(2, 0.1)
	// 0.1/(1 − 0.25) = 0.1333333; sqrt(1 − 0.5625) = 0.6614378;
	// 1 − 0.1·0.01 = 0.999.
	near(t, "LR", float64(s.LR), 0.1, 1e-8)
	near(t, "StepSize", float64(s.StepSize), 0.133333333, 1e-8)
	near(t, "BC2Sqrt", float64(s.BC2Sqrt), 0.661437828, 1e-7)
	near(t, "Decay", float64(s.Decay), 0.999, 1e-7)
	// Late steps: the corrections vanish.
	s = h.StepScalars(1000, 0.1)
	if s.StepSize != 0.1 || s.BC2Sqrt != 1 {
		t.Errorf("step 1000: StepSize %g, BC2Sqrt %g, want 0.1 and 1", s.StepSize, s.BC2Sqrt)
	}
	h.Kind = "adam"
	if s := h.StepScalars(2, 0.1); s.Decay != 1 {
		t.Errorf("adam Decay = %g, want 1", s.Decay)
	}
	if s := (Hyper{Kind: "sgd", Config: Config{Momentum: 0.9}}).StepScalars(3, 0.5); s != (StepScalars{LR: 0.5, Decay: 1}) {
		t.Errorf("sgd StepScalars = %+v", s)
	}
}

func TestAdamConfigErrors(t *testing.T) {
	d := DefaultAdamConfig()
	cases := []struct {
		edit func(*AdamConfig)
		want []string
	}{
		{func(c *AdamConfig) { c.Beta1 = 1 }, []string{"adam", "beta1", "[0, 1)", "got 1"}},
		{func(c *AdamConfig) { c.Beta1 = -0.1 }, []string{"beta1", "[0, 1)"}},
		{func(c *AdamConfig) { c.Beta2 = 1.5 }, []string{"beta2", "[0, 1)"}},
		{func(c *AdamConfig) { c.Beta2 = float32(nan()) }, []string{"beta2", "NaN"}},
		{func(c *AdamConfig) { c.Eps = 0 }, []string{"eps", "> 0"}},
		{func(c *AdamConfig) { c.WeightDecay = -0.01 }, []string{"weight decay", ">= 0"}},
		{func(c *AdamConfig) { c.WeightDecay = float32(math.Inf(1)) }, []string{"weight decay", "finite"}},
	}
	for _, c := range cases {
		cfg := d
		c.edit(&cfg)
		o, err := NewAdam(cfg)
		wantErr(t, err, c.want...)
		if o != nil {
			t.Errorf("NewAdam(%+v) returned an optimizer with its error", cfg)
		}
	}
	_, err := NewAdam(AdamConfig{})
	wantErr(t, err, "eps must be a finite number > 0")
}
