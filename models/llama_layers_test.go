package models

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/gradcheck"
)

// Central differences of smooth layers (no kinks): the quotient's error is
// eps²/6 times a third derivative of order one, and float32 rounding of
// the objective over 2·eps.
const (
	smoothEps  = 1e-2
	smoothAtol = 5e-4
	smoothRtol = 5e-3
)

// checkLayer builds l on e for rows rows of in features (the parameters
// drawn in [-1, 1) and scaled by scale), and checks the gradients of every
// parameter and of the input of the objective Σ proj·l(x) against central
// differences. It returns the number of elements checked.
func checkLayer(t *testing.T, e compute.Engine, l Layer, rows, in, out int, scale float32) int {
	t.Helper()
	r := rand.New(rand.NewPCG(11, 3))
	a := newArenas(e, l.Params(), r)
	for i := range a.params {
		a.params[i] *= scale
	}
	x := gradcheck.Uniform(e, r, rows, in)
	if _, err := l.Build(Build{Engine: e, Batch: rows, Params: a.pv, Grads: a.gv, In: []int{in}, NeedInputGrad: true}); err != nil {
		t.Fatal(err)
	}
	proj := compute.HostData(gradcheck.Uniform(e, r, rows, out))
	f := func() float64 { return gradcheck.Dot(proj, compute.HostData(l.Forward(x))) }
	f()
	dy := e.Alloc(rows, out)
	e.SetTensor(dy, proj)
	dx := append([]float32(nil), compute.HostData(l.Backward(dy))...)
	grads := append([]float32(nil), a.grads...)
	n := 0
	for i, s := range l.Params() {
		o := a.offsets[i]
		n += gradcheck.CheckFD(t, s.Name, a.params[o:o+s.Size()], grads[o:o+s.Size()], f, smoothEps, smoothAtol, smoothRtol)
	}
	return n + gradcheck.CheckFD(t, "dx", compute.HostData(x), dx, f, smoothEps, smoothAtol, smoothRtol)
}

func TestRMSNormLayerGradients(t *testing.T) {
	for name, e := range gradcheck.Engines(t) {
		t.Run(name, func(t *testing.T) {
			if n := checkLayer(t, e, NewRMSNorm("norm", 6, 1e-5), 4, 6, 6, 1); n != 6+4*6 {
				t.Errorf("checked %d elements", n)
			}
		})
	}
}

func TestSwiGLUMLPGradients(t *testing.T) {
	for name, e := range gradcheck.Engines(t) {
		t.Run(name, func(t *testing.T) {
			l := NewSwiGLUMLP("mlp", 6, 10, 0.02, 0.02)
			if n := checkLayer(t, e, l, 4, 6, 6, 1); n != 3*60+4*6 {
				t.Errorf("checked %d elements", n)
			}
		})
	}
}

// Grouped attention with rotary embedding: two sequences of three
// positions, 4 query heads sharing 2 key/value heads of size 2, and a
// small θ, so that the rotation turns every pair by a large angle.
func TestGroupedSelfAttentionGradients(t *testing.T) {
	for name, e := range gradcheck.Engines(t) {
		t.Run(name, func(t *testing.T) {
			l := NewGroupedSelfAttention("attn", 3, 8, 4, 2, 4, 0.02, 0.02)
			if n := checkLayer(t, e, l, 6, 8, 8, 1); n != 64+32+32+64+6*8 {
				t.Errorf("checked %d elements", n)
			}
		})
	}
}

// The joined q/k/v projection needs q_proj, k_proj and v_proj's weights
// back to back, as Layout puts them; views that are not say so at Build.
func TestGroupedSelfAttentionWantsAdjacentWeights(t *testing.T) {
	e := gradcheck.Engines(t)["gonum"] // pure Go: always there
	l := NewGroupedSelfAttention("attn", 3, 8, 4, 2, 4, 0.02, 0.02)
	specs := l.Params()
	a := newArenas(e, specs, rand.New(rand.NewPCG(1, 2)))
	b := Build{Engine: e, Batch: 6, In: []int{8}, NeedInputGrad: true, Params: a.pv, Grads: a.gv}
	if _, err := l.Build(b); err != nil {
		t.Fatal(err)
	}
	// k_proj's weight in memory of its own
	own := make([]float32, specs[1].Size())
	b.Params = append([]compute.Tensor{a.pv[0], e.View(compute.HostArena(own), 0, specs[1].Shape...)}, a.pv[2:]...)
	_, err := l.Build(b)
	if want := "attn: the weights attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight do not lie back to back"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Build with k_proj's weight apart: %v, want an error containing %q", err, want)
	}
}

// Likewise SwiGLU's joined gate_proj and up_proj.
func TestSwiGLUMLPWantsAdjacentWeights(t *testing.T) {
	e := gradcheck.Engines(t)["gonum"]
	l := NewSwiGLUMLP("mlp", 8, 16, 0.02, 0.02)
	specs := l.Params()
	a := newArenas(e, specs, rand.New(rand.NewPCG(3, 4)))
	b := Build{Engine: e, Batch: 6, In: []int{8}, NeedInputGrad: true, Params: a.pv, Grads: a.gv}
	if _, err := l.Build(b); err != nil {
		t.Fatal(err)
	}
	// up_proj's gradient in memory of its own
	own := make([]float32, specs[1].Size())
	b.Grads = append([]compute.Tensor{a.gv[0], e.View(compute.HostArena(own), 0, specs[1].Shape...)}, a.gv[2:]...)
	_, err := l.Build(b)
	if want := "mlp: the weights mlp.gate_proj.weight, mlp.up_proj.weight do not lie back to back"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Build with up_proj's gradient apart: %v, want an error containing %q", err, want)
	}
}
