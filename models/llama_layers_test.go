package models

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/gradcheck"
)

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
