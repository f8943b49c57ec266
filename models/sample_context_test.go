package models

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/gradcheck"
)

// buildOneSequence builds m for one sequence over fresh host arenas of
// InitArena(seed)'s values.
func buildOneSequence(t *testing.T, e compute.Engine, m Model, seed uint64) {
	t.Helper()
	specs := m.Params()
	offsets, n := Layout(specs)
	pa, ga := compute.HostArena(InitArena(specs, seed)), compute.HostArena(make([]float32, n))
	var pv, gv []compute.Tensor
	for i, s := range specs {
		pv = append(pv, e.View(pa, offsets[i], s.Shape...))
		gv = append(gv, e.View(ga, offsets[i], s.Shape...))
	}
	if err := m.Build(e, pv, gv, 1); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateShortContextsSameLogits: on the CPU engines, a window shorter
// than the context runs through a build at 64, 128, ... tokens over the
// model's parameters (a GPT's position table's first rows), and its logits
// at the window's last position are the whole context's below 64 tokens,
// at 64, past it and at the context, for a GPT (learned positions) and a
// Llama (rotary, grouped heads): bit for bit with the pure-Go GEMM, within
// rounding (1e-5 of the largest logit) with OpenBLAS, whose kernels for
// the last rows of a matrix round otherwise than for the same rows inside
// a taller one; the sampled tokens are those of forwards over the whole
// context.
func TestGenerateShortContextsSameLogits(t *testing.T) {
	gpt, err := NewGPT("gpt", GPTConfig{Layers: 2, Heads: 2, Width: 16, Context: 160, Vocab: 37})
	if err != nil {
		t.Fatal(err)
	}
	llama, err := NewLlama("llama", LlamaConfig{Layers: 2, Width: 16, Heads: 4, KVHeads: 2, FFNHidden: 24,
		Context: 160, Vocab: 37, RopeTheta: 100})
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range gradcheck.Engines(t) {
		for i, fresh := range []LanguageModel{gpt, llama} {
			m, err := fresh.Fresh()
			if err != nil {
				t.Fatal(err)
			}
			if i == 1 { // the shorter builds keep the model's recompute mode
				if err := m.(*Llama).SetRecompute(RecomputeBlock); err != nil {
					t.Fatal(err)
				}
			}
			buildOneSequence(t, e, m, 3)
			var d *Decoder
			switch m := m.(type) {
			case *GPT:
				d = m.Decoder
			case *Llama:
				d = m.Decoder
			}
			whole := newWindow(d)
			text := make([]int32, 160)
			for i := range text {
				text[i] = int32((i*7 + 3) % 37)
			}
			for _, n := range []int{1, 5, 63, 64, 65, 100, 128, 129, 160} {
				want := map[int]int{1: 64, 5: 64, 63: 64, 64: 64, 65: 128, 100: 128, 128: 128, 129: 160, 160: 160}[n]
				if got := d.shortContext(n); got != want {
					t.Fatalf("%s %s: a window of %d runs at context %d, want %d", name, d.name, n, got, want)
				}
				short := d
				if want < 160 {
					if short, err = d.atContext(want); err != nil {
						t.Fatal(err)
					}
					if short.recompute != d.recompute {
						t.Fatalf("%s %s at context %d: recompute %s, the model's %s", name, d.name, want, short.recompute, d.recompute)
					}
				}
				a, b := newWindow(short).logits(text[:n]), whole.logits(text[:n])
				scale := 0.0
				for _, v := range b {
					scale = max(scale, math.Abs(float64(v)))
				}
				for j := range b {
					off := math.Abs(float64(a[j]) - float64(b[j]))
					if name == "gonum" && math.Float32bits(a[j]) != math.Float32bits(b[j]) || off > 1e-5*scale {
						t.Fatalf("%s %s, %d tokens at context %d: logit %d %v, over the whole context %v", name, d.name, n, want, j, a[j], b[j])
					}
				}
			}
			so := SampleOptions{Temperature: 0.9, TopK: 8, Seed: 4}
			got, err := d.Generate(context.Background(), text[:3], 150, so)
			if err != nil {
				t.Fatal(err)
			}
			next := func(w []int32) ([]float32, error) { return whole.logits(w), nil }
			want, err := generate(context.Background(), 160, 37, next, text[:3], 150, so)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s %s: drew %v through the short contexts, %v over the whole context", name, d.name, got, want)
			}
		}
	}
}
