package cudatest

import (
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
)

// TestBiasBackwardBF16 is sdc_bias_act_backward on bf16: the column sums of
// dy written over dbias, the scratch size, and the library's argument checks.
func TestBiasBackwardBF16(t *testing.T) {
	const bf, id = cudalib.BFloat16, cudalib.Identity
	g := newGPU(t)
	const n, oc = 5, 16
	dy, b0 := g.randBF(n*oc, 1, 0), g.randF32(oc, 1)
	pdy, pb := g.bf(dy), g.f32(b0)
	sb, err := g.d.BiasActBackwardScratchBytes(bf, n, oc)
	g.ok(err)
	if sb != oc*4 {
		t.Errorf("scratch %d bytes, want one chunk's partials, %d", sb, oc*4)
	}
	scratch := g.alloc(sb)
	g.ok(g.d.BiasActBackward(bf, pdy, 0, n, oc, pb, id, false, scratch))
	ref := make([]float64, oc) // written: b0 is overwritten
	for i := 0; i < n; i++ {
		for j := 0; j < oc; j++ {
			ref[j] += dy[i*oc+j]
		}
	}
	near(t, "dbias (written)", g.readF32(pb, oc), ref, 1e-6, 1e-7)
	wantArg(t, "OC=12", g.d.BiasActBackward(bf, pdy, 0, n, 12, pb, id, false, scratch))
	wantArg(t, "ReLU", g.d.BiasActBackward(bf, pdy, 0, n, oc, pb, cudalib.ReLU, false, scratch))
	wantArg(t, "accumulate", g.d.BiasActBackward(bf, pdy, 0, n, oc, pb, id, true, scratch))
	wantArg(t, "no scratch", g.d.BiasActBackward(bf, pdy, 0, n, oc, pb, id, false, 0))
}
