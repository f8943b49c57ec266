package cudatest

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"github.com/symddp/symddp/internal/cudalib"
)

// attRef: causal attention of one (B=1) sequence in matrices: S = QK^T
// scale, P = softmax (masked), out = PV.
func attRef(qkv []float64, tt, c, nh int) (out, lse []float64) {
	hs := c / nh
	scale := 1 / math.Sqrt(float64(hs))
	out, lse = make([]float64, tt*c), make([]float64, nh*tt)
	for h := 0; h < nh; h++ {
		for i := 0; i < tt; i++ {
			S := make([]float64, i+1)
			mx := math.Inf(-1)
			for j := range S {
				for x := 0; x < hs; x++ {
					S[j] += qkv[i*3*c+h*hs+x] * qkv[j*3*c+c+h*hs+x]
				}
				S[j] *= scale
				mx = math.Max(mx, S[j])
			}
			var z float64
			for _, sv := range S {
				z += math.Exp(sv - mx)
			}
			lse[h*tt+i] = mx + math.Log(z)
			for x := 0; x < hs; x++ {
				var o float64
				for j, sv := range S {
					o += math.Exp(sv-lse[h*tt+i]) * qkv[j*3*c+2*c+h*hs+x]
				}
				out[i*c+h*hs+x] = o
			}
		}
	}
	return
}

// attBwdRef: the backward in matrices, dV = P^T dO, dP = dO V^T, dS = P∘(dP
// - D) scale, dQ = dS K, dK = dS^T Q, with P = exp(S - lse). Exact (bf16
// false): D = rowsum(P∘dP), from the exact forward. bf16: as the kernels,
// from the out and lse given, D = rowsum(dO∘out), P and dS rounded to bf16
// (through float32) before their products.
func attBwdRef(qkv, dout, out, lse []float64, tt, c, nh int, bf16 bool) []float64 {
	hs := c / nh
	scale := 1 / math.Sqrt(float64(hs))
	rnd := func(x float64) float64 {
		if !bf16 {
			return x
		}
		return bfRound(float32(x))
	}
	dqkv := make([]float64, tt*3*c)
	at := func(i, part, h, x int) int { return i*3*c + part*c + h*hs + x }
	for h := 0; h < nh; h++ {
		for i := 0; i < tt; i++ {
			P, dP := make([]float64, i+1), make([]float64, i+1)
			var D float64
			for j := range P {
				var s float64
				for x := 0; x < hs; x++ {
					s += qkv[at(i, 0, h, x)] * qkv[at(j, 1, h, x)]
					dP[j] += dout[i*c+h*hs+x] * qkv[at(j, 2, h, x)]
				}
				P[j] = math.Exp(s*scale - lse[h*tt+i])
				D += P[j] * dP[j]
			}
			if bf16 {
				D = 0
				for x := 0; x < hs; x++ {
					D += dout[i*c+h*hs+x] * out[i*c+h*hs+x]
				}
			}
			for j := range P {
				dS := rnd(P[j] * (dP[j] - D) * scale)
				pj := rnd(P[j])
				for x := 0; x < hs; x++ {
					dqkv[at(j, 2, h, x)] += pj * dout[i*c+h*hs+x]
					dqkv[at(i, 0, h, x)] += dS * qkv[at(j, 1, h, x)]
					dqkv[at(j, 1, h, x)] += dS * qkv[at(i, 0, h, x)]
				}
			}
		}
	}
	return dqkv
}

// bfRound: f to the nearest bf16, ties to even, done apart from bf16.go's
// bit trick (through the two neighbours).
func bfRound(f float32) float64 {
	lo := math.Float32frombits(math.Float32bits(f) &^ 0xffff) // toward zero
	hi := math.Float32frombits(math.Float32bits(lo) + 0x10000)
	dl, dh := math.Abs(float64(f)-float64(lo)), math.Abs(float64(hi)-float64(f))
	if dl < dh || (dl == dh && math.Float32bits(lo)&0x10000 == 0) {
		return float64(lo)
	}
	return float64(hi)
}

// checkAttBwd: dqkv against the exact backward (within the roundings of P,
// dS and out: a few bf16 ulps of the gradient's size) and against the one
// that rounds where the kernels do (only dqkv's own rounding, and the rare
// flip of a rounded P or dS).
func checkAttBwd(t *testing.T, g *gpu, qkv, dout []float64, pout, plse, pdq uintptr, tt, c, nh int) {
	t.Helper()
	ro, rl := attRef(qkv, tt, c, nh)
	got := g.readBF(pdq, tt*3*c)
	near(t, "dqkv vs exact", got, attBwdRef(qkv, dout, ro, rl, tt, c, nh, false), 2e-2, 6e-2)
	near(t, "dqkv vs bf16 emulation", got, attBwdRef(qkv, dout, g.readBF(pout, tt*c), g.readF32(plse, nh*tt), tt, c, nh, true), bf16Tol, 1e-3)
}

// Shapes of the wmma kernels only (head size 32): the default runs them,
// computes the reference's values, and every call that names other kernels
// or a shape they do not take is refused as the library refuses it.
func TestAttentionBF16(t *testing.T) {
	g := newGPU(t)
	const b, tt, c, nh = 1, 64, 64, 2 // hs 32: the wmma kernels only
	qkv, dout := g.randBF(b*tt*3*c, 1, 0), g.randBF(b*tt*c, 1, 0)
	pqkv, pdo := g.bf(qkv), g.bf(dout)
	pout, plse, pdq := g.alloc(2*b*tt*c), g.alloc(4*b*nh*tt), g.alloc(2*b*tt*3*c)
	bytes, err := g.d.AttentionBackwardBF16ScratchBytes(cudalib.AttentionAuto, b, tt, c, nh)
	g.ok(err)
	if want := b * nh * tt * 4; bytes != want {
		t.Errorf("scratch %d bytes, want D's %d", bytes, want)
	}
	scratch := g.alloc(bytes)
	for _, impl := range []cudalib.AttentionImpl{cudalib.AttentionMMA, cudalib.AttentionCUDNN} {
		if ok, err := g.d.AttentionBF16Supported(impl, b, tt, c, nh); ok || err != nil {
			t.Errorf("%v supported at head size 32: %v, %v", impl, ok, err)
		}
	}
	if ok, err := g.d.AttentionBF16Supported(cudalib.AttentionAuto, b, tt, c, nh); !ok || err != nil {
		t.Errorf("auto not supported at head size 32: %v", err)
	}
	g.ok(g.d.AttentionBF16(cudalib.AttentionAuto, pout, plse, pqkv, b, tt, c, nh))
	ro, rl := attRef(qkv, tt, c, nh)
	near(t, "out", g.readBF(pout, b*tt*c), ro, bf16Tol, 1e-6)
	near(t, "lse", g.readF32(plse, b*nh*tt), rl, 1e-6, 1e-9)
	nan := make([]float64, b*tt*3*c)
	for i := range nan {
		nan[i] = math.NaN()
	}
	g.setBF(pdq, nan) // every element must be written
	g.ok(g.d.AttentionBackwardBF16(cudalib.AttentionAuto, pdq, pdo, pqkv, pout, plse, b, tt, c, nh, scratch))
	checkAttBwd(t, g, qkv, dout, pout, plse, pdq, tt, c, nh)
	dq := g.bits(pdq, b*tt*3*c)
	out := g.bits(pout, b*tt*c)
	g.ok(g.d.AttentionBF16(cudalib.AttentionWMMA, pout, plse, pqkv, b, tt, c, nh))
	g.ok(g.d.AttentionBackwardBF16(cudalib.AttentionWMMA, pdq, pdo, pqkv, pout, plse, b, tt, c, nh, scratch))
	if string(u16bytes(out)) != string(u16bytes(g.bits(pout, b*tt*c))) || string(u16bytes(dq)) != string(u16bytes(g.bits(pdq, b*tt*3*c))) {
		t.Error("wmma differs from the default")
	}
	wantArg(t, "mma at hs 32", g.d.AttentionBF16(cudalib.AttentionMMA, pout, plse, pqkv, b, tt, c, nh))
	wantArg(t, "mma bwd at hs 32", g.d.AttentionBackwardBF16(cudalib.AttentionMMA, pdq, pdo, pqkv, pout, plse, b, tt, c, nh, scratch))
	wantArg(t, "cudnn (a library without cuDNN)", g.d.AttentionBF16(cudalib.AttentionCUDNN, pout, plse, pqkv, b, tt, c, nh))
	wantArg(t, "impl 9", g.d.AttentionBF16(9, pout, plse, pqkv, b, tt, c, nh))
	wantArg(t, "T=32", g.d.AttentionBF16(cudalib.AttentionAuto, pout, plse, pqkv, b, 32, c, nh))
	wantArg(t, "hs 16", g.d.AttentionBF16(cudalib.AttentionAuto, pout, plse, pqkv, b, tt, 32, 2))
	wantArg(t, "C%NH", g.d.AttentionBF16(cudalib.AttentionAuto, pout, plse, pqkv, b, tt, c, 3))
	wantArg(t, "unaligned out", g.d.AttentionBF16(cudalib.AttentionAuto, pout+2, plse, pqkv, b, tt, c, nh))
	wantArg(t, "no scratch", g.d.AttentionBackwardBF16(cudalib.AttentionAuto, pdq, pdo, pqkv, pout, plse, b, tt, c, nh, 0))
	if n, err := g.d.AttentionBackwardBF16ScratchBytes(cudalib.AttentionAuto, b, tt, 32, 2); n != 0 || err != nil {
		t.Errorf("scratch at hs 16: %d, %v; want 0", n, err)
	}
}

func u16bytes(h []uint16) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h)) }

// At head size 64 and T 128 the default is the mma kernels; both compute the same.
func TestAttentionBF16MMA(t *testing.T) {
	g := newGPU(t)
	const b, tt, c, nh = 1, 128, 64, 1
	if ok, err := g.d.AttentionBF16Supported(cudalib.AttentionMMA, b, tt, c, nh); !ok || err != nil {
		t.Fatalf("mma not supported at hs 64, T 128: %v", err)
	}
	qkv, dout := g.randBF(b*tt*3*c, 1, 0), g.randBF(b*tt*c, 1, 0)
	pqkv, pdo := g.bf(qkv), g.bf(dout)
	pout, plse, pdq := g.alloc(2*b*tt*c), g.alloc(4*b*nh*tt), g.alloc(2*b*tt*3*c)
	bytes, err := g.d.AttentionBackwardBF16ScratchBytes(cudalib.AttentionAuto, b, tt, c, nh)
	g.ok(err)
	if want := b*nh*tt*4 + 3*64*64*2; bytes != want { // D and the three dS^T tiles of T=128
		t.Errorf("scratch %d bytes, want the mma kernels' %d", bytes, want)
	}
	scratch := g.alloc(bytes)
	var res [3][]uint16
	for v, impl := range []cudalib.AttentionImpl{cudalib.AttentionAuto, cudalib.AttentionMMA, cudalib.AttentionWMMA} {
		g.ok(g.d.AttentionBF16(impl, pout, plse, pqkv, b, tt, c, nh))
		g.ok(g.d.AttentionBackwardBF16(impl, pdq, pdo, pqkv, pout, plse, b, tt, c, nh, scratch))
		res[v] = append(g.bits(pout, b*tt*c), g.bits(pdq, b*tt*3*c)...)
		if v > 0 && string(u16bytes(res[v])) != string(u16bytes(res[0])) {
			t.Errorf("%v differs from the default", impl)
		}
	}
	ro, _ := attRef(qkv, tt, c, nh)
	near(t, "out", g.readBF(pout, b*tt*c), ro, bf16Tol, 1e-6)
	checkAttBwd(t, g, qkv, dout, pout, plse, pdq, tt, c, nh)
	wantArg(t, "mma at T=64", g.d.AttentionBF16(cudalib.AttentionMMA, pout, plse, pqkv, b, 64, c, nh))
}

// Grouped-query attention is the packed attention with each key/value head
// repeated over its group (Hugging Face's repeat_kv): the same out, lse and
// dq bits; a key/value head's dk and dv are its group's sums of the packed
// ones (the same bits with one head a group; else the group's sum of
// attBwdRef's, which rounds where the kernels do, within the gradient's
// own rounding).
func TestGroupedAttentionBF16(t *testing.T) {
	g := newGPU(t)
	const b, tt, nh, hs = 1, 64, 4, 32 // one sequence: attBwdRef's
	const c = nh * hs
	qkv, dout := g.randBF(b*tt*3*c, 1, 0), g.randBF(b*tt*c, 1, 0)
	pdo := g.bf(dout)
	// heads: the first n heads of part w (0 q, 1 k, 2 v) of a packed (B,T,3C) as a (B,T,n*hs)
	heads := func(src []float64, w, n int) []float64 {
		out := make([]float64, 0, b*tt*n*hs)
		for r := 0; r < b*tt; r++ {
			out = append(out, src[r*3*c+w*c:][:n*hs]...)
		}
		return out
	}
	for _, kvh := range []int{nh, 2} {
		grp := nh / kvh
		rep := append([]float64(nil), qkv...)
		for r := 0; r < b*tt; r++ {
			for h := 0; h < nh; h++ {
				for w := 1; w <= 2; w++ {
					copy(rep[r*3*c+w*c+h*hs:][:hs], qkv[r*3*c+w*c+h/grp*hs:][:hs])
				}
			}
		}
		prep := g.bf(rep)
		pout, plse, pdqkv := g.alloc(2*b*tt*c), g.alloc(4*b*nh*tt), g.alloc(2*b*tt*3*c)
		sp, err := g.d.AttentionBackwardBF16ScratchBytes(cudalib.AttentionAuto, b, tt, c, nh)
		g.ok(err)
		g.ok(g.d.AttentionBF16(cudalib.AttentionAuto, pout, plse, prep, b, tt, c, nh))
		g.ok(g.d.AttentionBackwardBF16(cudalib.AttentionAuto, pdqkv, pdo, prep, pout, plse, b, tt, c, nh, g.alloc(sp)))

		// the grouped layout: each row nh query heads, kvh key heads, kvh value heads
		w := (nh + 2*kvh) * hs
		pq, pk, pv := heads(qkv, 0, nh), heads(qkv, 1, kvh), heads(qkv, 2, kvh)
		gq := make([]float64, 0, b*tt*w)
		for r := 0; r < b*tt; r++ {
			gq = append(append(append(gq, pq[r*c:][:c]...), pk[r*kvh*hs:][:kvh*hs]...), pv[r*kvh*hs:][:kvh*hs]...)
		}
		gout, glse, gd := g.alloc(2*b*tt*c), g.alloc(4*b*nh*tt), g.alloc(2*b*tt*w)
		sg, err := g.d.GroupedAttentionBackwardBF16ScratchBytes(cudalib.AttentionAuto, b, tt, nh, kvh, hs)
		g.ok(err)
		if want := b * nh * tt * 4; sg != want {
			t.Errorf("KVH=%d: scratch %d bytes, want D's %d", kvh, sg, want)
		}
		g.ok(g.d.GroupedAttentionBF16(cudalib.AttentionAuto, gout, glse, g.bf(gq), b, tt, nh, kvh, hs))
		g.ok(g.d.GroupedAttentionBackwardBF16(cudalib.AttentionAuto, gd, pdo, g.bf(gq), gout, glse, b, tt, nh, kvh, hs, g.alloc(sg)))
		// part of a row of the grouped dqkv: columns lo..lo+n
		part := func(all []float64, lo, n int) []float64 {
			out := make([]float64, 0, b*tt*n)
			for r := 0; r < b*tt; r++ {
				out = append(out, all[r*w+lo:][:n]...)
			}
			return out
		}
		gdqkv := g.readBF(gd, b*tt*w)

		if string(u16bytes(g.bits(gout, b*tt*c))) != string(u16bytes(g.bits(pout, b*tt*c))) ||
			string(u16bytes(g.bits(glse, 2*b*nh*tt))) != string(u16bytes(g.bits(plse, 2*b*nh*tt))) {
			t.Errorf("KVH=%d: out or lse differs from the packed attention's", kvh)
		}
		packed := g.readBF(pdqkv, b*tt*3*c)
		rtol, atol := 0.0, 0.0 // one head a group: the packed gradients' bits
		if grp > 1 {
			packed = attBwdRef(rep, dout, g.readBF(pout, b*tt*c), g.readF32(plse, b*nh*tt), tt, c, nh, true)
			rtol, atol = bf16Tol, 1e-3
		}
		near(t, fmt.Sprintf("KVH=%d dq", kvh), part(gdqkv, 0, c), heads(packed, 0, nh), rtol, atol)
		for w, lo := range []int{1: c, 2: c + kvh*hs} {
			if w == 0 {
				continue
			}
			all := heads(packed, w, nh)
			sum := make([]float64, b*tt*kvh*hs)
			for r := 0; r < b*tt; r++ {
				for h := 0; h < nh; h++ {
					for x := 0; x < hs; x++ {
						sum[(r*kvh+h/grp)*hs+x] += all[(r*nh+h)*hs+x]
					}
				}
			}
			near(t, fmt.Sprintf("KVH=%d d%c", kvh, "qkv"[w]), part(gdqkv, lo, kvh*hs), sum, rtol, atol)
		}
	}
	p := g.alloc(2 * b * tt * 3 * c)
	wantArg(t, "cuDNN's grouped", g.d.GroupedAttentionBF16(cudalib.AttentionCUDNN, p, p, p, b, tt, nh, 2, hs))
	wantArg(t, "NH%KVH", g.d.GroupedAttentionBF16(cudalib.AttentionAuto, p, p, p, b, tt, nh, 3, hs))
	wantArg(t, "mma at hs 32", g.d.GroupedAttentionBF16(cudalib.AttentionMMA, p, p, p, b, tt, nh, 2, hs))
	wantArg(t, "no scratch", g.d.GroupedAttentionBackwardBF16(cudalib.AttentionAuto, p, p, p, p, p, b, tt, nh, 2, hs, 0))
	wantArg(t, "unaligned qkv", g.d.GroupedAttentionBF16(cudalib.AttentionAuto, p, p, p+2, b, tt, nh, 2, hs))
}
