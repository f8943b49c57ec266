package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Tests every optimizer setting of configs must pass.

// lrs are the learning rates of the three steps of the conformance runs.
var lrs = []float32{0.01, 0.05, 0.02}

// TestAgainstFloat64 runs three steps of every setting over random vectors
// and compares with the float64 reference.
func TestAgainstFloat64(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			const n = 1000
			p := randomVec(rng, n, 1)
			r := newRun(build(t, c.h), p)
			ref := newRef64(c.h, p)
			for step, lr := range lrs {
				g := randomVec(rng, n, 0.5)
				r.step(g, lr)
				ref.step(g, step+1, lr)
				for i := range p {
					want := ref.p[i]
					if math.Abs(float64(r.p[i])-want) > 2e-6*(1+math.Abs(want)) {
						t.Fatalf("step %d element %d: %.9g, float64 reference %.9g", step+1, i, r.p[i], want)
					}
				}
			}
		})
	}
}

// TestSpecBits checks the update against a transcription of the doc
// comments' float32 operations, bit for bit: device kernels are written from
// those comments.
func TestSpecBits(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			const n = 999
			p := randomVec(rng, n, 1)
			r := newRun(build(t, c.h), p)
			spec := newRun(build(t, c.h), p)
			for step, lr := range lrs {
				g := randomVec(rng, n, 0.5)
				r.step(g, lr)
				spec32(c.h, spec.p, g, spec.state, step+1, lr)
				sameBits(t, "params", r.p, spec.p)
				for k := range r.state {
					sameBits(t, "state", r.state[k], spec.state[k])
				}
			}
		})
	}
}

// TestDeterministic runs every setting twice, and once over two halves of
// the arena, and expects the same bits.
func TestDeterministic(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(9, 10))
			const n, half = 1001, 400
			p := randomVec(rng, n, 1)
			o := build(t, c.h)
			a, b, split := newRun(o, p), newRun(o, p), newRun(o, p)
			for step, lr := range lrs {
				g := randomVec(rng, n, 0.5)
				a.step(g, lr)
				b.step(g, lr)
				lo, hi := make([][]float32, len(split.state)), make([][]float32, len(split.state))
				for k, s := range split.state {
					lo[k], hi[k] = s[:half], s[half:]
				}
				o.Update(split.p[:half], g[:half], lo, step+1, lr)
				o.Update(split.p[half:], g[half:], hi, step+1, lr)
			}
			sameBits(t, "two runs", a.p, b.p)
			sameBits(t, "split run", a.p, split.p)
			for k := range a.state {
				sameBits(t, "two runs' state", a.state[k], b.state[k])
				sameBits(t, "split run's state", a.state[k], split.state[k])
			}
		})
	}
}

// TestStepOneIgnoresState fills the state with garbage before step 1 and
// expects the same result as from zeroed state.
func TestStepOneIgnoresState(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 12))
			p := randomVec(rng, 64, 1)
			o := build(t, c.h)
			clean, dirty := newRun(o, p), newRun(o, p)
			for _, s := range dirty.state {
				for i := range s {
					s[i] = float32(math.NaN())
				}
			}
			for _, lr := range lrs {
				g := randomVec(rng, 64, 0.5)
				clean.step(g, lr)
				dirty.step(g, lr)
			}
			sameBits(t, "params", clean.p, dirty.p)
		})
	}
}

func TestUpdateDoesNotAllocate(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(13, 14))
			p := randomVec(rng, 4096, 1)
			g := randomVec(rng, 4096, 0.5)
			r := newRun(build(t, c.h), p)
			if a := testing.AllocsPerRun(20, func() { r.step(g, 0.01) }); a != 0 {
				t.Errorf("Update allocates %g times per call", a)
			}
		})
	}
}

func TestHyperRebuilds(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			o := build(t, c.h)
			h := o.Hyper()
			if h != c.h {
				t.Errorf("Hyper() = %+v, want %+v", h, c.h)
			}
			if o.Name() != c.h.Kind || o.Slots() != len(o.StateNames()) {
				t.Errorf("Name %q, Slots %d, StateNames %q", o.Name(), o.Slots(), o.StateNames())
			}
			again, err := New(h.Kind, h.Config)
			if err != nil || again.Hyper() != h {
				t.Errorf("New(Hyper()) = %v, %v", again, err)
			}
		})
	}
}

func TestUpdatePanics(t *testing.T) {
	adam := build(t, configs[6].h)
	sgd := build(t, Hyper{Kind: "sgd", Config: Config{Momentum: 0.9}})
	p, g := make([]float32, 4), make([]float32, 4)
	two := [][]float32{make([]float32, 4), make([]float32, 4)}
	one := [][]float32{make([]float32, 4)}
	wantPanic(t, "3 grads for 4 params", func() { adam.Update(p, g[:3], two, 1, 0.1) })
	wantPanic(t, "1 state slices, want 2", func() { adam.Update(p, g, one, 1, 0.1) })
	wantPanic(t, "0 state slices, want 1", func() { sgd.Update(p, g, nil, 1, 0.1) })
	wantPanic(t, "state 1 has 2 elements", func() { adam.Update(p, g, [][]float32{two[0], two[1][:2]}, 1, 0.1) })
	wantPanic(t, "step 0", func() { sgd.Update(p, g, one, 0, 0.1) })
	wantPanic(t, "learning rate -0.1", func() { sgd.Update(p, g, one, 1, -0.1) })
	wantPanic(t, "learning rate NaN", func() { adam.Update(p, g, two, 1, float32(math.NaN())) })
	wantPanic(t, "learning rate +Inf", func() { adam.Update(p, g, two, 1, float32(math.Inf(1))) })
}
