package models

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/gradcheck"
)

// refMLP is the mlp's forward pass in float64 on the host: logits and the
// smallest |pre-activation| of any hidden unit.
func refMLP(specs []ParamSpec, offsets []int, params, x []float32, batch int) (logits []float64, margin float64) {
	margin = math.Inf(1)
	h := make([]float64, len(x))
	for i, v := range x {
		h[i] = float64(v)
	}
	for l := 0; l < len(specs); l += 2 {
		out, in := specs[l].Shape[0], specs[l].Shape[1]
		w, b := params[offsets[l]:], params[offsets[l+1]:]
		next := make([]float64, batch*out)
		for r := 0; r < batch; r++ {
			for o := 0; o < out; o++ {
				z := float64(b[o])
				for j := 0; j < in; j++ {
					z += h[r*in+j] * float64(w[o*in+j])
				}
				if l+2 < len(specs) { // hidden: ReLU
					margin = math.Min(margin, math.Abs(z))
					z = math.Max(z, 0)
				}
				next[r*out+o] = z
			}
		}
		h = next
	}
	return h, margin
}

// The whole mlp, loss included, against central differences; its forward
// against the float64 reference; ready in reverse layer order.
func TestMLPGradients(t *testing.T) {
	const batch, scale = 6, 0.2
	labels := []int32{0, 2, -1, 1, 2, 0}
	cfg := Config{Input: []int{2, 3}, Hidden: []int{5, 4}, Classes: 3}
	for name, e := range gradcheck.Engines(t) {
		t.Run(name, func(t *testing.T) {
			mm, err := New("mlp", cfg)
			if err != nil {
				t.Fatal(err)
			}
			m := mm.(*Classifier).Network()
			specs := m.Params()
			offsets, _ := Layout(specs)
			// Draw until no hidden pre-activation lies near ReLU's kink.
			var a *arenas
			var x compute.Tensor
			for seed := uint64(1); ; seed++ {
				r := rand.New(rand.NewPCG(seed, 2))
				a, x = newArenas(e, specs, r), gradcheck.Uniform(e, r, batch, 2, 3)
				if _, margin := refMLP(specs, offsets, a.params, compute.HostData(x), batch); margin > 0.05 {
					break
				}
			}
			if err := m.Build(e, a.pv, a.gv, batch); err != nil {
				t.Fatal(err)
			}
			ref, _ := refMLP(specs, offsets, a.params, compute.HostData(x), batch)
			for i, v := range compute.HostData(m.Forward(x)) {
				if math.Abs(float64(v)-ref[i]) > 1e-5*(1+math.Abs(ref[i])) {
					t.Fatalf("logits[%d] = %v, reference %v", i, v, ref[i])
				}
			}
			l := e.AllocLabels(batch)
			e.SetLabels(l, labels)
			ce := NewCrossEntropy(e, batch, 3)
			f := func() float64 {
				ce.Reset()
				ce.Apply(m.Forward(x), l, scale)
				loss, _, _ := ce.Totals()
				return scale * loss
			}
			f()
			var ready []int
			m.Backward(ce.Apply(m.Forward(x), l, scale), func(p int) { ready = append(ready, p) })
			if want := []int{4, 2, 0}; !slices.Equal(ready, want) {
				t.Errorf("ready called with %v, want %v", ready, want)
			}
			grads := append([]float32(nil), a.grads...)
			gradcheck.CheckFD(t, "grads", a.params, grads, f, 1e-3, 5e-4, 1e-2)
		})
	}
}

// A training step (forward, loss, backward) of the default mlp allocates
// nothing.
func TestStepDoesNotAllocate(t *testing.T) {
	const batch = 32
	for name, e := range gradcheck.Engines(t) {
		t.Run(name, func(t *testing.T) {
			mm, err := New("mlp", Config{})
			if err != nil {
				t.Fatal(err)
			}
			m := mm.(*Classifier).Network()
			r := rand.New(rand.NewPCG(1, 1))
			a := newArenas(e, m.Params(), r)
			if err := m.Build(e, a.pv, a.gv, batch); err != nil {
				t.Fatal(err)
			}
			x := gradcheck.Uniform(e, r, batch, 784)
			l := e.AllocLabels(batch)
			host := make([]int32, batch)
			for i := range host {
				host[i] = int32(i % 10)
			}
			host[batch-1] = -1
			ce := NewCrossEntropy(e, batch, 10)
			readyCalls := 0
			ready := func(int) { readyCalls++ }
			step := func() {
				e.SetLabels(l, host)
				m.Backward(ce.Apply(m.Forward(x), l, 1.0/batch), ready)
				ce.Totals()
			}
			if n := testing.AllocsPerRun(5, step); n != 0 {
				t.Errorf("%v allocations per step, want 0", n)
			}
			if readyCalls != 6*3 { // AllocsPerRun's warm-up run and 5 runs, 3 layers each
				t.Errorf("ready called %d times, want 18", readyCalls)
			}
		})
	}
}
