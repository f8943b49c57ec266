package optim

import "testing"

// handGrads are the gradients of the hand-computed runs, from p = 1 with
// lr = 0.1.
var handGrads = []float32{0.5, -0.25, 1}

// handRun runs o for the three hand steps on one parameter starting at 1 and
// returns the parameter after each step.
func handRun(t *testing.T, o Optimizer) []float64 {
	t.Helper()
	r := newRun(o, []float32{1})
	var out []float64
	for _, g := range handGrads {
		r.step([]float32{g}, 0.1)
		out = append(out, float64(r.p[0]))
	}
	return out
}

func TestSGDHand(t *testing.T) {
	// Worked by hand from the formulas of SGD's doc comment, exactly.
	cases := []struct {
		name string
		c    SGDConfig
		want []float64
	}{
		// p -= 0.1·g: 1 − 0.05, + 0.025, − 0.1.
		{"plain", SGDConfig{}, []float64{0.95, 0.975, 0.875}},
		// g' = g + 0.1·p: 0.6 → p 0.94; −0.25 + 0.094 = −0.156 → p 0.9556;
		// 1 + 0.09556 = 1.09556 → p 0.846044.
		{"wd", SGDConfig{WeightDecay: 0.1}, []float64{0.94, 0.9556, 0.846044}},
		// buf: 0.5; 0.45 − 0.25 = 0.2; 0.18 + 1 = 1.18. p −= 0.1·buf.
		{"momentum", SGDConfig{Momentum: 0.9}, []float64{0.95, 0.93, 0.812}},
		// d = g + 0.9·buf: 0.5 + 0.45 = 0.95; −0.25 + 0.18 = −0.07;
		// 1 + 1.062 = 2.062. p: 0.905, 0.912, 0.7058.
		{"nesterov", SGDConfig{Momentum: 0.9, Nesterov: true}, []float64{0.905, 0.912, 0.7058}},
		// g' 0.6, buf 0.6, p 0.94; g' −0.156, buf 0.54 − 0.156 = 0.384,
		// p 0.9016; g' 1.09016, buf 0.3456 + 1.09016 = 1.43576, p 0.758024.
		{"momentum/wd", SGDConfig{Momentum: 0.9, WeightDecay: 0.1}, []float64{0.94, 0.9016, 0.758024}},
		// g' 0.6, buf 0.6, d 1.14, p 0.886; g' −0.1614, buf 0.3786,
		// d −0.1614 + 0.34074 = 0.17934, p 0.868066; g' 1.0868066,
		// buf 1.4275466, d 1.0868066 + 1.28479194 = 2.37159854,
		// p 0.630906146.
		{"nesterov/wd", SGDConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 0.1}, []float64{0.886, 0.868066, 0.630906146}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := NewSGD(c.c)
			if err != nil {
				t.Fatal(err)
			}
			got := handRun(t, o)
			for i := range c.want {
				near(t, "p after step "+string(rune('1'+i)), got[i], c.want[i], 1e-6)
			}
		})
	}
}

func TestSGDState(t *testing.T) {
	plain, _ := NewSGD(SGDConfig{WeightDecay: 0.1})
	if plain.Slots() != 0 || len(plain.StateNames()) != 0 {
		t.Errorf("plain SGD: %d slots %q, want none", plain.Slots(), plain.StateNames())
	}
	mom, _ := NewSGD(SGDConfig{Momentum: 0.9, Nesterov: true})
	if mom.Slots() != 1 || len(mom.StateNames()) != 1 || mom.StateNames()[0] != "momentum" {
		t.Errorf("SGD with momentum: %d slots %q, want 1 [momentum]", mom.Slots(), mom.StateNames())
	}
	// The momentum slot holds buf: after the hand run's first two steps
	// it is 0.2 (see TestSGDHand).
	r := newRun(mom, []float32{1})
	r.step([]float32{0.5}, 0.1)
	r.step([]float32{-0.25}, 0.1)
	near(t, "momentum", float64(r.state[0][0]), 0.2, 1e-7)
}

func TestSGDConfigErrors(t *testing.T) {
	cases := []struct {
		c    SGDConfig
		want []string
	}{
		{SGDConfig{Momentum: -0.1}, []string{"sgd", "momentum", ">= 0", "-0.1"}},
		{SGDConfig{WeightDecay: -1}, []string{"sgd", "weight decay", ">= 0"}},
		{SGDConfig{Momentum: float32(nan())}, []string{"momentum", "NaN"}},
		{SGDConfig{Nesterov: true}, []string{"sgd", "nesterov needs momentum"}},
	}
	for _, c := range cases {
		o, err := NewSGD(c.c)
		wantErr(t, err, c.want...)
		if o != nil {
			t.Errorf("NewSGD(%+v) returned an optimizer with its error", c.c)
		}
	}
}
