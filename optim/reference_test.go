package optim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// This file holds what the optimizer tests share: a float64 reference of
// each update written from the formulas (not from the code under test), a
// float32 transcription of the doc comments' operation order, and a driver.

// ref64 is the float64 reference state of one optimizer run.
type ref64 struct {
	h      Hyper
	p      []float64
	s0, s1 []float64 // momentum, or m and v
}

// newRef64 starts a reference run from params p.
func newRef64(h Hyper, p []float32) *ref64 {
	r := &ref64{h: h, p: make([]float64, len(p)), s0: make([]float64, len(p)), s1: make([]float64, len(p))}
	for i, x := range p {
		r.p[i] = float64(x)
	}
	return r
}

// step applies update t with learning rate lr in float64.
func (r *ref64) step(g []float32, t int, lr float32) {
	h := r.h
	mu, wd, b1, b2, eps := float64(h.Momentum), float64(h.WeightDecay), float64(h.Beta1), float64(h.Beta2), float64(h.Eps)
	l := float64(lr)
	for i := range r.p {
		p, gi := r.p[i], float64(g[i])
		switch h.Kind {
		case "sgd":
			gi += wd * p
			d := gi
			if mu != 0 {
				if t == 1 {
					r.s0[i] = gi
				} else {
					r.s0[i] = mu*r.s0[i] + gi
				}
				d = r.s0[i]
				if h.Nesterov {
					d = gi + mu*r.s0[i]
				}
			}
			p -= l * d
		case "adam", "adamw":
			if h.Kind == "adamw" {
				p *= 1 - l*wd
			} else {
				gi += wd * p
			}
			r.s0[i] = b1*r.s0[i] + (1-b1)*gi
			r.s1[i] = b2*r.s1[i] + (1-b2)*gi*gi
			mhat := r.s0[i] / (1 - math.Pow(b1, float64(t)))
			vhat := r.s1[i] / (1 - math.Pow(b2, float64(t)))
			p -= l * mhat / (math.Sqrt(vhat) + eps)
		}
		r.p[i] = p
	}
}

// spec32 applies update t with the float32 operations of the doc comments,
// one element at a time, each product rounded (no fused multiply-add). The
// per-step constants are computed here again from their definitions.
func spec32(h Hyper, p, g []float32, state [][]float32, t int, lr float32) {
	mu, wd := h.Momentum, h.WeightDecay
	for i := range p {
		pi, gi := p[i], g[i]
		switch h.Kind {
		case "sgd":
			if wd != 0 {
				gi = gi + float32(wd*pi)
			}
			d := gi
			if mu != 0 {
				buf := gi
				if t > 1 {
					buf = float32(mu*state[0][i]) + gi
				}
				state[0][i] = buf
				d = buf
				if h.Nesterov {
					d = gi + float32(mu*buf)
				}
			}
			p[i] = pi - float32(lr*d)
		case "adam", "adamw":
			stepSize := float32(float64(lr) / (1 - math.Pow(float64(h.Beta1), float64(t))))
			bc2Sqrt := float32(math.Sqrt(1 - math.Pow(float64(h.Beta2), float64(t))))
			if h.Kind == "adamw" {
				pi = float32(pi * float32(1-float64(lr)*float64(wd)))
			} else if wd != 0 {
				gi = gi + float32(wd*pi)
			}
			m, v := state[0][i], state[1][i]
			if t == 1 {
				m, v = 0, 0
			}
			c1, c2 := 1-h.Beta1, 1-h.Beta2
			m = float32(h.Beta1*m) + float32(c1*gi)
			v = float32(h.Beta2*v) + float32(float32(c2*gi)*gi)
			state[0][i], state[1][i] = m, v
			den := float32(math.Sqrt(float64(v)))/bc2Sqrt + h.Eps
			p[i] = pi - float32(stepSize*m)/den
		}
	}
}

// run is an optimizer run over float32 slices.
type run struct {
	o      Optimizer
	p      []float32
	state  [][]float32
	t      int
	t1, t2 []float32
}

// newRun starts a run of o from a copy of p with zeroed state.
func newRun(o Optimizer, p []float32) *run {
	r := &run{o: o, p: append([]float32(nil), p...)}
	for range o.Slots() {
		r.state = append(r.state, make([]float32, len(p)))
	}
	return r
}

// step applies the next update with gradient g (not modified) and lr.
func (r *run) step(g []float32, lr float32) {
	r.t++
	r.o.Update(r.p, g, r.state, r.t, lr)
}

// configs are the optimizer settings the tests cover: each optimizer with
// and without weight decay, momentum and Nesterov; one Adam with a large eps
// so that where eps enters shows in the values.
var configs = []struct {
	name string
	h    Hyper
}{
	{"sgd", Hyper{Kind: "sgd"}},
	{"sgd/wd", Hyper{Kind: "sgd", Config: Config{WeightDecay: 0.1}}},
	{"sgd/momentum", Hyper{Kind: "sgd", Config: Config{Momentum: 0.9}}},
	{"sgd/momentum/wd", Hyper{Kind: "sgd", Config: Config{Momentum: 0.9, WeightDecay: 0.1}}},
	{"sgd/nesterov", Hyper{Kind: "sgd", Config: Config{Momentum: 0.9, Nesterov: true}}},
	{"sgd/nesterov/wd", Hyper{Kind: "sgd", Config: Config{Momentum: 0.9, Nesterov: true, WeightDecay: 0.1}}},
	{"adam", Hyper{Kind: "adam", Config: Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}}},
	{"adam/wd", Hyper{Kind: "adam", Config: Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}}},
	{"adam/eps", Hyper{Kind: "adam", Config: Config{Beta1: 0.8, Beta2: 0.99, Eps: 0.01}}},
	{"adamw", Hyper{Kind: "adamw", Config: Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}}},
	{"adamw/nowd", Hyper{Kind: "adamw", Config: Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}}},
}

// build returns the optimizer of h through the registry.
func build(t testing.TB, h Hyper) Optimizer {
	t.Helper()
	o, err := New(h.Kind, h.Config)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// randomVec returns n normally distributed float32s of standard deviation sd.
func randomVec(rng *rand.Rand, n int, sd float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * sd)
	}
	return x
}

// near fails t unless got is within tol of want.
func near(t testing.TB, what string, got, want, tol float64) {
	t.Helper()
	if !(math.Abs(got-want) <= tol) {
		t.Errorf("%s = %.10g, want %.10g ± %g", what, got, want, tol)
	}
}

// sameBits fails t unless a and b hold the same float32 bit patterns.
func sameBits(t testing.TB, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: lengths %d and %d", what, len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: element %d differs: %g (%#08x) and %g (%#08x)", what, i,
				a[i], math.Float32bits(a[i]), b[i], math.Float32bits(b[i]))
		}
	}
}

// wantErr fails t unless err is an error whose message contains each of
// parts.
func wantErr(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("no error, want one containing %q", parts)
		return
	}
	for _, part := range parts {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not contain %q", err, part)
		}
	}
}

// wantPanic fails t unless f panics with a message containing part.
func wantPanic(t testing.TB, part string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("no panic, want one containing %q", part)
			return
		}
		if msg, _ := r.(string); !strings.Contains(msg, part) {
			t.Errorf("panic %v does not contain %q", r, part)
		}
	}()
	f()
}
