package cudatest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
)

// The fp32 flash attention is the float64 reference in matrices (attRef,
// attBwdRef exact) to fp32 rounding: on packed qkv (ldq = ldkv = 3C), and
// on three tensors with two query heads a key/value head, where it is the
// packed attention with each key/value head repeated over its group (the
// same out and lse bits; dk and dv the group's sums). Every element of out,
// dq, dk and dv is written. T = 70 runs past one 64-row tile.
func TestAttentionF32(t *testing.T) {
	g := newGPU(t)
	const tt, nh, kvh, hs = 70, 4, 2, 16
	const c, kw, grp = nh * hs, kvh * hs, nh / kvh
	q, k, v, dout := g.randF32(tt*c, 1), g.randF32(tt*kw, 1), g.randF32(tt*kw, 1), g.randF32(tt*c, 1)
	rep := make([]float32, 0, tt*3*c) // packed qkv, key/value head j repeated for query heads j·grp ...
	for r := 0; r < tt; r++ {
		rep = append(rep, q[r*c:][:c]...)
		for _, kv := range [][]float32{k, v} {
			for h := 0; h < nh; h++ {
				rep = append(rep, kv[r*kw+h/grp*hs:][:hs]...)
			}
		}
	}
	ro, rl := attRef(f32s(rep), tt, c, nh)
	rd := attBwdRef(f32s(rep), f32s(dout), ro, rl, tt, c, nh, false)
	nan := func(n int) uintptr {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(math.NaN())
		}
		return g.f32(s)
	}
	pdo, scratch := g.f32(dout), g.alloc(4*cudalib.AttentionF32ScratchFloats(1, nh, tt))

	prep, pout, plse, pd := g.f32(rep), nan(tt*c), g.alloc(4*nh*tt), nan(tt*3*c)
	g.ok(g.d.AttentionF32(pout, plse, prep, prep+4*c, prep+8*c, 3*c, 3*c, 1, tt, nh, nh, hs))
	near(t, "packed out", g.readF32(pout, tt*c), ro, 1e-6, 1e-7)
	near(t, "packed lse", g.readF32(plse, nh*tt), rl, 1e-6, 0)
	g.ok(g.d.AttentionBackwardF32(pd, pd+4*c, pd+8*c, pdo, prep, prep+4*c, prep+8*c, pout, plse, 3*c, 3*c, 1, tt, nh, nh, hs, scratch))
	near(t, "packed dqkv", g.readF32(pd, tt*3*c), rd, 1e-5, 1e-6)

	pq, pk, pv := g.f32(q), g.f32(k), g.f32(v)
	gout, glse, dq, dk, dv := nan(tt*c), g.alloc(4*nh*tt), nan(tt*c), nan(tt*kw), nan(tt*kw)
	g.ok(g.d.AttentionF32(gout, glse, pq, pk, pv, c, kw, 1, tt, nh, kvh, hs))
	if fmt.Sprint(g.readF32(gout, tt*c), g.readF32(glse, nh*tt)) != fmt.Sprint(g.readF32(pout, tt*c), g.readF32(plse, nh*tt)) {
		t.Error("grouped out or lse differs from the packed attention's")
	}
	g.ok(g.d.AttentionBackwardF32(dq, dk, dv, pdo, pq, pk, pv, gout, glse, c, kw, 1, tt, nh, kvh, hs, scratch))
	wq, wk, wv := make([]float64, tt*c), make([]float64, tt*kw), make([]float64, tt*kw)
	for r := 0; r < tt; r++ {
		copy(wq[r*c:][:c], rd[r*3*c:])
		for h := 0; h < nh; h++ {
			for x := 0; x < hs; x++ {
				wk[r*kw+h/grp*hs+x] += rd[r*3*c+c+h*hs+x]
				wv[r*kw+h/grp*hs+x] += rd[r*3*c+2*c+h*hs+x]
			}
		}
	}
	near(t, "grouped dq", g.readF32(dq, tt*c), wq, 1e-5, 1e-6)
	near(t, "grouped dk", g.readF32(dk, tt*kw), wk, 1e-5, 1e-6)
	near(t, "grouped dv", g.readF32(dv, tt*kw), wv, 1e-5, 1e-6)

	// The library's checks: the sizes first, then the pointers.
	p := pd
	fwd := func(ldq, ldkv, b, t, nh, kvh, hs int) error {
		return g.d.AttentionF32(p, p, p, p, p, ldq, ldkv, b, t, nh, kvh, hs)
	}
	bwd := func(ldq, ldkv, b, t, nh, kvh, hs int, lse, scratch uintptr) error {
		return g.d.AttentionBackwardF32(p, p, p, p, p, p, p, p, lse, ldq, ldkv, b, t, nh, kvh, hs, scratch)
	}
	const sizes, null = "(want sizes >= 1, HS <= 64", "NULL pointer"
	for _, tc := range []struct {
		what, want string
		err        error
	}{
		{"B=0", sizes, fwd(c, kw, 0, tt, nh, kvh, hs)},
		{"HS=65", sizes, fwd(4*65, 2*65, 1, tt, 4, 2, 65)},
		{"NH%KVH", sizes, fwd(c, 3*hs, 1, tt, nh, 3, hs)},
		{"ldq < NH*HS", sizes, fwd(c-1, kw, 1, tt, nh, kvh, hs)},
		{"ldkv < KVH*HS", sizes, bwd(c, kw-1, 1, tt, nh, kvh, hs, p, scratch)},
		{"byte offsets past an int64", sizes, fwd(c, kw, 1<<40, 1<<20, nh, kvh, hs)},
		{"NULL out", null, g.d.AttentionF32(0, p, p, p, p, c, kw, 1, tt, nh, kvh, hs)},
		{"NULL lse", null, bwd(c, kw, 1, tt, nh, kvh, hs, 0, scratch)},
		{"NULL scratch", null, bwd(c, kw, 1, tt, nh, kvh, hs, p, 0)},
		{"HS=65 and NULL scratch", sizes, bwd(4*65, 2*65, 1, tt, 4, 2, 65, p, 0)},
	} {
		wantArg(t, tc.what, tc.err)
		if tc.err != nil && !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.what, tc.err, tc.want)
		}
	}
}
