package cudatest

import "testing"

// TestEmbedBF16 is sdc_embed_bf16 and sdc_embed_backward_bf16: the
// token's row plus the position's, the gradients added to both tables, and
// the library's argument checks.
func TestEmbedBF16(t *testing.T) {
	g := newGPU(t)
	const b, tt, c, v, tp = 2, 3, 8, 5, 4 // wpe has more rows than T
	wte, wpe := g.randBF(v*c, 0.5, 0), g.randBF(tp*c, 0.5, 0)
	tok := []int32{3, 1, 3, 0, 3, 1}
	dy := g.randBF(b*tt*c, 1, 0)
	gte0, gpe0 := g.randF32(v*c, 0.1), g.randF32(tp*c, 0.1)
	pwte, pwpe, ptok, pdy := g.bf(wte), g.bf(wpe), g.i32(tok), g.bf(dy)
	pout, pgte, pgpe := g.alloc(2*b*tt*c), g.f32(gte0), g.f32(gpe0)
	sb, err := g.d.EmbedBackwardBF16ScratchBytes(b, tt, v)
	if err != nil || sb <= 0 {
		t.Fatalf("scratch bytes %d", sb)
	}
	scratch := g.alloc(sb)
	g.ok(g.d.EmbedBF16(pout, ptok, pwte, pwpe, b, tt, c))
	ro := make([]float64, b*tt*c)
	for bb := 0; bb < b; bb++ {
		for p := 0; p < tt; p++ {
			for j := 0; j < c; j++ {
				ro[(bb*tt+p)*c+j] = wte[int(tok[bb*tt+p])*c+j] + wpe[p*c+j]
			}
		}
	}
	near(t, "embed", g.readBF(pout, b*tt*c), ro, bf16Tol, 0)
	g.ok(g.d.EmbedBackwardBF16(pgte, pgpe, pdy, ptok, b, tt, c, v, scratch, sb))
	rte, rpe := f32s(gte0), f32s(gpe0)
	for i := 0; i < b*tt; i++ {
		for j := 0; j < c; j++ {
			rte[int(tok[i])*c+j] += dy[i*c+j]
			rpe[(i%tt)*c+j] += dy[i*c+j]
		}
	}
	near(t, "dwte (added to)", g.readF32(pgte, v*c), rte, 1e-6, 1e-7)
	near(t, "dwpe (added to)", g.readF32(pgpe, tp*c), rpe, 1e-6, 1e-7)
	wantArg(t, "small scratch", g.d.EmbedBackwardBF16(pgte, pgpe, pdy, ptok, b, tt, c, v, scratch, sb-4))
	wantArg(t, "C=4", g.d.EmbedBF16(pout, ptok, pwte, pwpe, b, tt, 4))
}
