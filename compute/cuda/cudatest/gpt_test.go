package cudatest

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/internal/cudalib"
)

// The references here are written apart from gpt.go's loops (other
// formulas where there are any: E[x²]-mean², finite differences, the
// attention in matrices, D as rowsum(P∘dP)) and in float64; a value the
// kernels store in bf16 must lie within its rounding (2^-9 relative, taken
// as 2^-8) of the reference unless said otherwise.

const bf16Tol = 1.0 / 256

type gpu struct {
	t   *testing.T
	d   *Device
	k   cudalib.GPTKernels
	rng *rand.Rand
}

func newGPU(t *testing.T) *gpu {
	t.Helper()
	d := NewDevice()
	return &gpu{t: t, d: d, k: d.GPTKernels(), rng: rand.New(rand.NewPCG(7, uint64(len(t.Name()))))}
}

func (g *gpu) alloc(bytes int) uintptr {
	p, err := g.d.DevAlloc(bytes)
	if err != nil {
		g.t.Fatal(err)
	}
	return p
}

// bfExact truncates x to a value bf16 holds exactly (inputs need no rounding).
func bfExact(x float64) float64 {
	return float64(math.Float32frombits(math.Float32bits(float32(x)) &^ 0xffff))
}

// randBF n bf16-exact values of sd around mean.
func (g *gpu) randBF(n int, sd, mean float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = bfExact(mean + sd*g.rng.NormFloat64())
	}
	return v
}

func (g *gpu) randF32(n int, sd float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(sd * g.rng.NormFloat64())
	}
	return v
}

func (g *gpu) up(p uintptr, src unsafe.Pointer, bytes int) {
	if err := g.d.HtoD(false, p, src, bytes); err != nil {
		g.t.Fatal(err)
	}
}

// bf uploads bf16-exact values (the upper halves of their float32 bits).
func (g *gpu) bf(v []float64) uintptr {
	p := g.alloc(2 * len(v))
	g.setBF(p, v)
	return p
}

func (g *gpu) setBF(p uintptr, v []float64) {
	h := make([]uint16, len(v)+1)
	for i, x := range v {
		u := math.Float32bits(float32(x))
		if u&0xffff != 0 {
			g.t.Fatalf("input %v is not a bf16 value", x)
		}
		h[i] = uint16(u >> 16)
	}
	g.up(p, unsafe.Pointer(&h[0]), 2*len(v))
}

func (g *gpu) f32(v []float32) uintptr {
	p := g.alloc(4 * len(v))
	g.up(p, unsafe.Pointer(&v[0]), 4*len(v))
	return p
}

func (g *gpu) i32(v []int32) uintptr {
	p := g.alloc(4 * len(v))
	g.up(p, unsafe.Pointer(&v[0]), 4*len(v))
	return p
}

func (g *gpu) bits(p uintptr, n int) []uint16 {
	h := make([]uint16, n+1)
	if err := g.d.DtoH(false, unsafe.Pointer(&h[0]), p, 2*n); err != nil {
		g.t.Fatal(err)
	}
	return h[:n]
}

func (g *gpu) readBF(p uintptr, n int) []float64 {
	f := make([]float64, n)
	for i, h := range g.bits(p, n) {
		f[i] = float64(math.Float32frombits(uint32(h) << 16))
	}
	return f
}

func (g *gpu) readF32(p uintptr, n int) []float64 {
	h := make([]float32, n)
	if err := g.d.DtoH(false, unsafe.Pointer(&h[0]), p, 4*n); err != nil {
		g.t.Fatal(err)
	}
	f := make([]float64, n)
	for i, v := range h {
		f[i] = float64(v)
	}
	return f
}

func (g *gpu) ok(err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}

// near: |got - ref| <= atol*rms(ref) + rtol*|ref| element by element.
func near(t *testing.T, name string, got, ref []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(ref) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(ref))
	}
	var ss float64
	for _, r := range ref {
		ss += r * r
	}
	rms := math.Sqrt(ss / float64(max(len(ref), 1)))
	bad := 0
	for i := range ref {
		if !(math.Abs(got[i]-ref[i]) <= atol*rms+rtol*math.Abs(ref[i])) {
			if bad < 3 {
				t.Errorf("%s[%d] = %.8g, want %.8g", name, i, got[i], ref[i])
			}
			bad++
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d values off", name, bad, len(ref))
	}
}

func f32s(v []float32) []float64 {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return f
}

func wantArg(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, cudalib.ErrArgument) {
		t.Errorf("%s: err %v, want a bad argument (cudalib.ErrArgument)", what, err)
	}
}

func TestBF16Rounding(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80},
		{1 + 1.0/256, 0x3f80},             // tie: to even (down)
		{1 + 3.0/256, 0x3f82},             // tie: to even (up)
		{1 + 1.0/256 + 1.0/65536, 0x3f81}, // above the tie
		{-2.5, 0xc020},
		{float32(math.Inf(1)), 0x7f80},
		{float32(math.Inf(-1)), 0xff80},
		{math.MaxFloat32, 0x7f80},
		{float32(math.Copysign(0, -1)), 0x8000},
		{float32(math.NaN()), 0x7fc0},
	} {
		if got := bf16FromF32(c.f); got != c.want {
			t.Errorf("bf16FromF32(%g) = %#x, want %#x", c.f, got, c.want)
		}
	}
	// float64: one rounding, not two (float32 first would make a false tie).
	for _, c := range []struct {
		x    float64
		want uint16
	}{
		{1 + 1.0/256 + 0x1p-40, 0x3f81},
		{-(1 + 1.0/256 + 0x1p-40), 0xbf81},
		{1 + 1.0/256, 0x3f80},
		{1e300, 0x7f80},
		{1e-300, 0},
		{math.NaN(), 0x7fc0},
		{math.Inf(-1), 0xff80},
	} {
		if got := bf16FromF64(c.x); got != c.want {
			t.Errorf("bf16FromF64(%g) = %#x, want %#x", c.x, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		x := r.NormFloat64() * math.Pow(2, float64(r.IntN(60)-30))
		h := bf16FromF64(x)
		lo, hi := bf16ToF64(h), 0.0
		// the neighbour on x's side
		if math.Abs(lo) < math.Abs(x) {
			hi = bf16ToF64(h + 1)
		} else {
			hi = bf16ToF64(h - 1)
		}
		if math.Abs(x-lo) > math.Abs(x-hi) {
			t.Fatalf("bf16FromF64(%v) = %v, %v is nearer", x, lo, hi)
		}
	}
}

// lnRef: LayerNorm in float64, the variance as E[x²] - mean².
func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

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

// bfRound: f to the nearest bf16, ties to even, done apart from gpt.go's
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

func TestGPTAttention(t *testing.T) {
	g := newGPU(t)
	const b, tt, c, nh = 1, 64, 64, 2 // hs 32: the wmma kernels only
	qkv, dout := g.randBF(b*tt*3*c, 1, 0), g.randBF(b*tt*c, 1, 0)
	pqkv, pdo := g.bf(qkv), g.bf(dout)
	pout, plse, pdq := g.alloc(2*b*tt*c), g.alloc(4*b*nh*tt), g.alloc(2*b*tt*3*c)
	scratch := g.alloc(g.k.AttentionBackwardScratchBytes(b, tt, c, nh))
	if g.k.AttentionMMASupported(tt, c, nh) {
		t.Fatal("mma supported at head size 32")
	}
	g.ok(g.k.AttentionForward(pout, plse, pqkv, b, tt, c, nh, 1))
	ro, rl := attRef(qkv, tt, c, nh)
	near(t, "out", g.readBF(pout, b*tt*c), ro, bf16Tol, 1e-6)
	near(t, "lse", g.readF32(plse, b*nh*tt), rl, 1e-6, 1e-9)
	nan := make([]float64, b*tt*3*c)
	for i := range nan {
		nan[i] = math.NaN()
	}
	g.setBF(pdq, nan) // every element must be written
	g.ok(g.k.AttentionBackward(pdq, pdo, pqkv, pout, plse, b, tt, c, nh, scratch, 1))
	checkAttBwd(t, g, qkv, dout, pout, plse, pdq, tt, c, nh)
	dq := g.bits(pdq, b*tt*3*c)
	out := g.bits(pout, b*tt*c)
	g.ok(g.k.AttentionForwardWMMA(pout, plse, pqkv, b, tt, c, nh, 1))
	g.ok(g.k.AttentionBackwardWMMA(pdq, pdo, pqkv, pout, plse, b, tt, c, nh, scratch, 1))
	if string(u16bytes(out)) != string(u16bytes(g.bits(pout, b*tt*c))) || string(u16bytes(dq)) != string(u16bytes(g.bits(pdq, b*tt*3*c))) {
		t.Error("wmma differs from the default")
	}
	wantArg(t, "mma at hs 32", g.k.AttentionForwardMMA(pout, plse, pqkv, b, tt, c, nh, 1))
	wantArg(t, "mma bwd at hs 32", g.k.AttentionBackwardMMA(pdq, pdo, pqkv, pout, plse, b, tt, c, nh, scratch, 1))
	wantArg(t, "T=32", g.k.AttentionForward(pout, plse, pqkv, b, 32, c, nh, 1))
	wantArg(t, "hs 16", g.k.AttentionForward(pout, plse, pqkv, b, tt, 32, 2, 1))
	wantArg(t, "C%NH", g.k.AttentionForward(pout, plse, pqkv, b, tt, c, 3, 1))
	wantArg(t, "no scratch", g.k.AttentionBackward(pdq, pdo, pqkv, pout, plse, b, tt, c, nh, 0, 1))
}

func u16bytes(h []uint16) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h)) }

// At head size 64 and T 128 the default is the mma variant; all compute the same.
func TestGPTAttentionMMA(t *testing.T) {
	g := newGPU(t)
	const b, tt, c, nh = 1, 128, 64, 1
	if !g.k.AttentionMMASupported(tt, c, nh) {
		t.Fatal("mma not supported at hs 64, T 128")
	}
	qkv, dout := g.randBF(b*tt*3*c, 1, 0), g.randBF(b*tt*c, 1, 0)
	pqkv, pdo := g.bf(qkv), g.bf(dout)
	pout, plse, pdq := g.alloc(2*b*tt*c), g.alloc(4*b*nh*tt), g.alloc(2*b*tt*3*c)
	scratch := g.alloc(g.k.AttentionBackwardScratchBytes(b, tt, c, nh))
	var res [3][]uint16
	for v, f := range []struct {
		fwd func(out, lse, qkv uintptr, b, t, c, nh int, stream uintptr) error
		bwd func(dqkv, dout, qkv, out, lse uintptr, b, t, c, nh int, scratch, stream uintptr) error
	}{{g.k.AttentionForward, g.k.AttentionBackward}, {g.k.AttentionForwardMMA, g.k.AttentionBackwardMMA},
		{g.k.AttentionForwardWMMA, g.k.AttentionBackwardWMMA}} {
		g.ok(f.fwd(pout, plse, pqkv, b, tt, c, nh, 1))
		g.ok(f.bwd(pdq, pdo, pqkv, pout, plse, b, tt, c, nh, scratch, 1))
		res[v] = append(g.bits(pout, b*tt*c), g.bits(pdq, b*tt*3*c)...)
		if v > 0 && string(u16bytes(res[v])) != string(u16bytes(res[0])) {
			t.Errorf("variant %d differs from the default", v)
		}
	}
	ro, _ := attRef(qkv, tt, c, nh)
	near(t, "out", g.readBF(pout, b*tt*c), ro, bf16Tol, 1e-6)
	checkAttBwd(t, g, qkv, dout, pout, plse, pdq, tt, c, nh)
	wantArg(t, "mma at T=64", g.k.AttentionForwardMMA(pout, plse, pqkv, b, 64, c, nh, 1))
}

// gemmRef: op(A) op(B) of stored row-major A, B (float64, naive).
func gemmRef(a, b []float64, m, n, k int, ta, tb bool) []float64 {
	c := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				av, bv := a[i*k+l], b[l*n+j]
				if ta {
					av = a[l*m+i]
				}
				if tb {
					bv = b[j*k+l]
				}
				s += av * bv
			}
			c[i*n+j] = s
		}
	}
	return c
}

func geluGradTanh(x float64) float64 {
	const h = 1e-6
	return (geluTanh(x+h) - geluTanh(x-h)) / (2 * h)
}

func TestGPTGemm(t *testing.T) {
	g := newGPU(t)
	lt, err := g.k.LtCreate()
	g.ok(err)
	const m, n, k = 6, 8, 5
	a, b := g.randBF(m*k, 1, 0), g.randBF(k*n, 1, 0)
	pa, pb := g.bf(a), g.bf(b)
	ws := g.alloc(1024)
	biasV := g.randBF(max(m, n), 0.5, 0)
	auxIn := g.randBF(m*n, 1, 0)
	c0 := g.randBF(m*n, 1, 0)
	for epi := cudalib.GPTEpiNone; epi <= cudalib.GPTEpiBGradA; epi++ {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, ct := range []cudalib.GPTDType{cudalib.GPTBF16, cudalib.GPTF32} {
					if epiHasAux(epi) && ct == cudalib.GPTF32 {
						continue
					}
					for _, bt := range []cudalib.GPTDType{cudalib.GPTBF16, cudalib.GPTF32} {
						for _, acc := range []bool{false, true} {
							name := gemmName(epi, ta, tb, ct, bt, acc)
							desc := cudalib.GemmDesc{M: m, N: n, K: k, TransA: ta, TransB: tb, Batch: 1, CType: ct,
								BiasType: bt, Epilogue: epi, Accumulate: acc, WorkspaceBytes: 1024}
							plan, err := g.k.GemmCreate(lt, desc)
							g.ok(err)
							// The stored A is (k,m) when ta: the same values reinterpreted.
							pc, pbias, paux := g.alloc(4*m*n), g.alloc(4*max(m, n)), g.bf(auxIn)
							put := func(p uintptr, t cudalib.GPTDType, v []float64) {
								if t == cudalib.GPTBF16 {
									g.setBF(p, v)
									return
								}
								f := make([]float32, len(v))
								for i, x := range v {
									f[i] = float32(x)
								}
								g.up(p, unsafe.Pointer(&f[0]), 4*len(f))
							}
							get := func(p uintptr, t cudalib.GPTDType, cnt int) []float64 {
								if t == cudalib.GPTBF16 {
									return g.readBF(p, cnt)
								}
								return g.readF32(p, cnt)
							}
							put(pc, ct, c0)
							put(pbias, bt, biasV)
							g.ok(g.k.GemmRun(plan, lt, pc, pa, pb, pbias, paux, ws, 1))
							ref := gemmRef(a, b, m, n, k, ta, tb)
							if acc {
								for i := range ref {
									ref[i] += c0[i]
								}
							}
							var refBias, refAux []float64
							switch epi {
							case cudalib.GPTEpiBias, cudalib.GPTEpiGELUBias, cudalib.GPTEpiGELUAuxBias:
								refAux = make([]float64, m*n)
								for i := range ref {
									refAux[i] = ref[i] + biasV[i%n]
									ref[i] = refAux[i]
									if epi != cudalib.GPTEpiBias {
										ref[i] = geluTanh(ref[i])
									}
								}
							case cudalib.GPTEpiDGELU, cudalib.GPTEpiDGELUBGrad:
								if epi == cudalib.GPTEpiDGELUBGrad {
									refBias = make([]float64, n)
								}
								for i := range ref {
									ref[i] *= geluGradTanh(auxIn[i])
									if refBias != nil {
										refBias[i%n] += ref[i]
									}
								}
							case cudalib.GPTEpiBGradA:
								refBias = make([]float64, m)
								for i := 0; i < m; i++ {
									for l := 0; l < k; l++ {
										if ta {
											refBias[i] += a[l*m+i]
										} else {
											refBias[i] += a[i*k+l]
										}
									}
								}
							}
							rtol := 1e-6
							if ct == cudalib.GPTBF16 {
								rtol = bf16Tol
							}
							if epi == cudalib.GPTEpiDGELU || epi == cudalib.GPTEpiDGELUBGrad {
								rtol = max(rtol, 1e-5) // the finite-difference gelu'
							}
							near(t, name+" C", get(pc, ct, m*n), ref, rtol, 1e-8)
							if epi == cudalib.GPTEpiGELUAuxBias {
								near(t, name+" aux", g.readBF(paux, m*n), refAux, bf16Tol, 1e-8)
							} else {
								near(t, name+" aux kept", g.readBF(paux, m*n), auxIn, 0, 0)
							}
							if refBias != nil {
								brtol := 1e-5
								if bt == cudalib.GPTBF16 {
									brtol = bf16Tol
								}
								near(t, name+" bias grad", get(pbias, bt, len(refBias)), refBias, brtol, 1e-6)
							} else {
								near(t, name+" bias kept", get(pbias, bt, len(biasV)), biasV, 0, 0)
							}
							g.k.GemmDestroy(plan)
						}
					}
				}
			}
		}
	}
	if lp := g.k.(*GPT).LivePlans(); lp != 0 {
		t.Errorf("%d plans live after destroying all", lp)
	}
}

func gemmName(epi cudalib.GPTEpilogue, ta, tb bool, ct, bt cudalib.GPTDType, acc bool) string {
	tr := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	ty := func(t cudalib.GPTDType) string {
		if t == cudalib.GPTF32 {
			return "f32"
		}
		return "bf16"
	}
	s := "epi" + string(rune('0'+epi)) + " " + tr(ta) + tr(tb) + " C " + ty(ct) + " bias " + ty(bt)
	if acc {
		s += " acc"
	}
	return s
}

// TestGPTGemmRunInto: an accumulating plan run into another output reads C
// and leaves it; a plan that does not accumulate is refused.
func TestGPTGemmRunInto(t *testing.T) {
	g := newGPU(t)
	lt, err := g.k.LtCreate()
	g.ok(err)
	const m, n, k = 4, 8, 3
	a, w, c0, bias := g.randBF(m*k, 1, 0), g.randBF(n*k, 1, 0), g.randBF(m*n, 1, 0), g.randBF(n, 0.5, 0)
	pa, pw, pc, pbias, pd, ws := g.bf(a), g.bf(w), g.bf(c0), g.bf(bias), g.alloc(2*m*n), g.alloc(1024)
	desc := cudalib.GemmDesc{M: m, N: n, K: k, TransB: true, Batch: 1, CType: cudalib.GPTBF16,
		BiasType: cudalib.GPTBF16, Epilogue: cudalib.GPTEpiBias, Accumulate: true, WorkspaceBytes: 1024}
	plan, err := g.k.GemmCreate(lt, desc)
	g.ok(err)
	g.ok(g.k.GemmRunInto(plan, lt, pd, pc, pa, pw, pbias, 0, ws, 1))
	ref := gemmRef(a, w, m, n, k, false, true)
	for i := range ref {
		ref[i] += bias[i%n] + c0[i]
	}
	near(t, "d = A W^T + bias + c", g.readBF(pd, m*n), ref, bf16Tol, 1e-8)
	near(t, "c kept", g.readBF(pc, m*n), c0, 0, 0)
	desc.Accumulate = false
	plain, err := g.k.GemmCreate(lt, desc)
	g.ok(err)
	wantArg(t, "does not accumulate", g.k.GemmRunInto(plain, lt, pd, pc, pa, pw, pbias, 0, ws, 1))
	g.k.GemmDestroy(plan)
	g.k.GemmDestroy(plain)
}

func TestGPTGemmBatched(t *testing.T) {
	g := newGPU(t)
	lt, err := g.k.LtCreate()
	g.ok(err)
	const batch, m, n, k = 3, 4, 8, 6
	const sa, sb, sc = m*k + 8, k*n + 16, m*n + 8 // strides with gaps
	a, b := g.randBF(batch*sa, 1, 0), g.randBF(batch*sb, 1, 0)
	pa, pb := g.bf(a), g.bf(b)
	for _, ct := range []cudalib.GPTDType{cudalib.GPTBF16, cudalib.GPTF32} {
		for _, tr := range [][2]bool{{false, false}, {true, true}} {
			desc := cudalib.GemmDesc{M: m, N: n, K: k, TransA: tr[0], TransB: tr[1], Batch: batch, StrideA: sa,
				StrideB: sb, StrideC: sc, CType: ct, Accumulate: true}
			plan, err := g.k.GemmCreate(lt, desc)
			g.ok(err)
			c0 := g.randBF(batch*sc, 1, 0)
			pc := g.bf(c0)
			if ct == cudalib.GPTF32 {
				f := make([]float32, len(c0))
				for i, x := range c0 {
					f[i] = float32(x)
				}
				pc = g.f32(f)
			}
			g.ok(g.k.GemmRun(plan, lt, pc, pa, pb, 0, 0, 0, 1))
			var got []float64
			rtol := 1e-6
			if ct == cudalib.GPTBF16 {
				got, rtol = g.readBF(pc, batch*sc), bf16Tol
			} else {
				got = g.readF32(pc, batch*sc)
			}
			ref := append([]float64(nil), c0...)
			for z := 0; z < batch; z++ {
				cz := gemmRef(a[z*sa:z*sa+m*k], b[z*sb:z*sb+k*n], m, n, k, tr[0], tr[1])
				for i, v := range cz {
					ref[z*sc+i] += v
				}
			}
			near(t, "batched "+gemmName(0, tr[0], tr[1], ct, 0, true), got, ref, rtol, 1e-8)
			g.k.GemmDestroy(plan)
		}
	}
}

func TestGPTGemmErrors(t *testing.T) {
	g := newGPU(t)
	lt, err := g.k.LtCreate()
	g.ok(err)
	lt2, _ := g.k.LtCreate()
	ok := cudalib.GemmDesc{M: 4, N: 8, K: 8, Batch: 1, Epilogue: cudalib.GPTEpiGELUAuxBias}
	for name, d := range map[string]cudalib.GemmDesc{
		"m=0":                {M: 0, N: 8, K: 8, Batch: 1},
		"batch 0":            {M: 4, N: 8, K: 8},
		"batched epilogue":   {M: 4, N: 8, K: 8, Batch: 2, Epilogue: cudalib.GPTEpiBias},
		"aux with n=6":       {M: 4, N: 6, K: 8, Batch: 1, Epilogue: cudalib.GPTEpiDGELU},
		"aux with fp32 C":    {M: 4, N: 8, K: 8, Batch: 1, Epilogue: cudalib.GPTEpiGELUAuxBias, CType: cudalib.GPTF32},
		"unknown epilogue":   {M: 4, N: 8, K: 8, Batch: 1, Epilogue: 9},
		"unknown type":       {M: 4, N: 8, K: 8, Batch: 1, CType: 2},
		"negative workspace": {M: 4, N: 8, K: 8, Batch: 1, WorkspaceBytes: -1},
	} {
		_, err := g.k.GemmCreate(lt, d)
		wantArg(t, name, err)
	}
	_, err = g.k.GemmCreate(0, ok)
	wantArg(t, "no lt", err)
	_, err = g.k.GemmCreate(12345, ok)
	wantArg(t, "not an lt", err)
	plan, err := g.k.GemmCreate(lt, ok)
	g.ok(err)
	pa, pb, pc, pbias, paux := g.alloc(256), g.alloc(256), g.alloc(256), g.alloc(16), g.alloc(256)
	g.ok(g.k.GemmRun(plan, lt, pc, pa, pb, pbias, paux, 0, 1))
	wantArg(t, "other lt", g.k.GemmRun(plan, lt2, pc, pa, pb, pbias, paux, 0, 1))
	wantArg(t, "no bias", g.k.GemmRun(plan, lt, pc, pa, pb, 0, paux, 0, 1))
	wantArg(t, "no aux", g.k.GemmRun(plan, lt, pc, pa, pb, pbias, 0, 0, 1))
	wantArg(t, "no C", g.k.GemmRun(plan, lt, 0, pa, pb, pbias, paux, 0, 1))
	var ge *cudalib.GPTError
	if err := g.k.GemmRun(plan, lt, pc, pa+2, pb, pbias, paux, 0, 1); !errors.As(err, &ge) || ge.Code != cudalib.GPTErrBLAS {
		t.Errorf("unaligned A: %v, want SDG_ERR_BLAS", err)
	}
	g.k.LtDestroy(lt)
	wantArg(t, "destroyed lt", g.k.GemmRun(plan, lt, pc, pa, pb, pbias, paux, 0, 1))
	g.k.GemmDestroy(plan)
	wantArg(t, "destroyed plan", g.k.GemmRun(plan, lt2, pc, pa, pb, pbias, paux, 0, 1))
	g.k.(*GPT).RejectEpilogue(cudalib.GPTEpiDGELUBGrad)
	_, err = g.k.GemmCreate(lt2, cudalib.GemmDesc{M: 4, N: 8, K: 8, Batch: 1, Epilogue: cudalib.GPTEpiDGELUBGrad})
	if !errors.As(err, &ge) || ge.Code != cudalib.GPTErrBLAS {
		t.Errorf("rejected epilogue: %v, want SDG_ERR_BLAS", err)
	}
}

// A captured sequence (layernorm, GEMM with an epilogue, AdamW) does
// nothing until launched, then what the eager calls do, reading the device
// memory of the replay: new inputs and new hyperparameters take effect.
func TestGPTCaptureReplay(t *testing.T) {
	const n, c, oc = 4, 16, 8
	type run struct {
		g                                    *gpu
		px, pw, pb, pout, pw2, py, pbias, ph uintptr
		pp, pg, pm, pv                       uintptr
		lt, plan                             uintptr
	}
	setup := func() *run {
		g := newGPU(t)
		g.rng = rand.New(rand.NewPCG(3, 4)) // the same data for both
		r := &run{g: g}
		r.px, r.pw, r.pb = g.bf(g.randBF(n*c, 1, 0)), g.bf(g.randBF(c, 0.2, 1)), g.bf(g.randBF(c, 0.2, 0))
		r.pout, r.pw2, r.py, r.pbias = g.alloc(2*n*c), g.bf(g.randBF(oc*c, 0.3, 0)), g.alloc(2*n*oc), g.bf(g.randBF(oc, 1, 0))
		r.pp, r.pg, r.pm, r.pv = g.f32(g.randF32(oc, 1)), g.f32(g.randF32(oc, 1)), g.alloc(4*oc), g.alloc(4*oc)
		r.ph = g.hyper(hyper{lr: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-8, wd: 0.1, gradScale: 1, step: 1})
		var err error
		r.lt, err = g.k.LtCreate()
		g.ok(err)
		r.plan, err = g.k.GemmCreate(r.lt, cudalib.GemmDesc{M: n, N: oc, K: c, TransB: true, Batch: 1, Epilogue: cudalib.GPTEpiGELUBias})
		g.ok(err)
		return r
	}
	step := func(r *run) {
		k := r.g.k
		r.g.ok(r.g.d.LayerNorm(cudalib.BFloat16, r.pout, 0, 0, r.px, r.pw, r.pb, n, c, lnEps))
		r.g.ok(k.GemmRun(r.plan, r.lt, r.py, r.pout, r.pw2, r.pbias, 0, 0, 1))
		r.g.ok(r.g.d.AdamWBF16(r.pp, 0, r.pg, r.pm, r.pv, 0, 0, oc, r.ph))
	}
	change := func(r *run) { // new input and a second step with another lr
		x := make([]float64, n*c)
		for i := range x {
			x[i] = float64(i%7) - 3
		}
		r.g.setBF(r.px, x)
		h := hyper{lr: 3e-2, beta1: 0.9, beta2: 0.99, eps: 1e-8, wd: 0.1, gradScale: 1, step: 2}
		r.g.up(r.ph, unsafe.Pointer(&h), int(unsafe.Sizeof(h)))
	}
	state := func(r *run) []float64 {
		return append(append(r.g.readBF(r.py, n*oc), r.g.readF32(r.pp, oc)...), r.g.readF32(r.pm, oc)...)
	}
	eager, graph := setup(), setup()
	step(eager)
	g := graph.g
	g.ok(g.d.CaptureBegin())
	step(graph)
	exec, err := g.d.CaptureEnd()
	g.ok(err)
	if got := state(graph); got[0] != 0 || g.k.(*GPT).Calls("sdg_gemm_run") != 0 {
		t.Fatal("a captured launch ran before the graph was launched")
	}
	g.ok(g.d.GraphLaunch(exec, cudalib.StepValues{}))
	near(t, "first replay", state(graph), state(eager), 0, 0)
	change(eager)
	step(eager)
	change(graph)
	g.ok(g.d.GraphLaunch(exec, cudalib.StepValues{}))
	near(t, "second replay", state(graph), state(eager), 0, 0)
}

func TestNewEmulatedGPTKernels(t *testing.T) {
	d := NewDevice()
	if k := emulatedOptions(d, cuda.Options{}).GPTKernels; k != d.GPTKernels() || k == nil {
		t.Errorf("GPTKernels %v, want the device's", k)
	}
	other := NewDevice().GPTKernels()
	if k := emulatedOptions(d, cuda.Options{GPTKernels: other}).GPTKernels; k != other {
		t.Error("the caller's GPTKernels replaced")
	}
	if e := NewEmulated(cuda.Options{}); e == nil {
		t.Fatal("no engine")
	}
}
