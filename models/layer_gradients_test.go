package models_test

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/gradcheck"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/models/layertest"
)

// clearOfKink accepts draws whose pre-activations x·Wᵀ + b, for W (out, in)
// and b (out) the first two parameters, lie farther than 3 Eps from ReLU's
// kink (one step moves one by at most Eps).
func clearOfKink(in, out int) func([][]float32, []float32) bool {
	return func(p [][]float32, x []float32) bool {
		w, b := p[0], p[1]
		for r := range len(x) / in {
			for o := range out {
				z := float64(b[o])
				for i := range in {
					z += float64(x[r*in+i]) * float64(w[o*in+i])
				}
				if math.Abs(z) < 3*layertest.DefaultEps {
					return false
				}
			}
		}
		return true
	}
}

// clearOfZero accepts inputs farther than 3 Eps from ReLU's kink.
func clearOfZero(_ [][]float32, x []float32) bool {
	for _, v := range x {
		if math.Abs(float64(v)) < 3*layertest.DefaultEps {
			return false
		}
	}
	return true
}

// The layers of package models against central differences, and the Layer
// contract, with models/layertest: its default options, on every BLAS
// here, for ten seeds (the defaults are chosen to pass them). Linear is
// linear in its parameters and input, so its quotients are exact up to
// float32 rounding: tighter bounds.
func TestLayerGradients(t *testing.T) {
	linear := layertest.Options{Atol: 2e-4, Rtol: 2e-3}
	linearReLU := linear
	linearReLU.Accept = clearOfKink(6, 5)
	for name, e := range gradcheck.Engines(t) {
		for _, tc := range []struct {
			what  string
			l     models.Layer
			batch int
			in    []int
			o     layertest.Options
			n     int
		}{
			{"linear", models.NewLinear("fc", 6, 5, compute.Identity), 4, []int{6}, linear, 30 + 5 + 24},
			{"linear+relu", models.NewLinear("fc", 6, 5, compute.ReLU), 4, []int{6}, linearReLU, 30 + 5 + 24},
			{"first linear", models.NewLinear("fc", 6, 5, compute.Identity), 4, []int{6}, layertest.Options{FirstLayer: true}, 30 + 5},
			{"layernorm", models.NewLayerNorm("ln", 6), 4, []int{6}, layertest.Options{}, 12 + 24},
			{"rmsnorm", models.NewRMSNorm("norm", 6, 1e-5), 4, []int{6}, layertest.Options{}, 6 + 24},
			{"relu", models.NewReLU(), 3, []int{2, 4}, layertest.Options{Accept: clearOfZero}, 24},
			{"gelu", models.NewGELU(), 3, []int{2, 4}, layertest.Options{}, 24},
			{"gelu mlp", models.NewGELUMLP("mlp", 4, 8, 0.5, 0.5), 3, []int{4}, layertest.Options{}, 32 + 8 + 32 + 4 + 12},
			{"swiglu mlp", models.NewSwiGLUMLP("mlp", 6, 10, 0.02, 0.02), 4, []int{6}, layertest.Options{}, 3*60 + 24},
			{"causal attention", models.NewCausalSelfAttention("attn", 3, 4, 2), 6, []int{12}, layertest.Options{}, 72},
			{"grouped attention", models.NewGroupedSelfAttention("attn", 3, 8, 4, 2, 4, 0.02, 0.02), 6, []int{8}, layertest.Options{}, 64 + 32 + 32 + 64 + 48},
			{"residual", models.NewResidual("res", models.NewLayerNorm("res.ln", 4), models.NewLinear("res.fc", 4, 4, compute.Identity)), 3, []int{4}, layertest.Options{}, 8 + 20 + 12},
		} {
			t.Run(name+"/"+tc.what, func(t *testing.T) {
				for seed := range uint64(10) {
					tc.o.Seed = seed
					n, err := layertest.Check(e, tc.l, tc.batch, tc.in, tc.o)
					if err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
					if n != tc.n {
						t.Fatalf("seed %d: checked %d elements, want %d", seed, n, tc.n)
					}
				}
			})
		}
	}
}
