package cudatest

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/symddp/symddp/compute/cuda"
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

// A captured sequence (layernorm, GEMM with an epilogue, AdamW) does
// nothing until launched, then what the eager calls do, reading the device
// memory of the replay: new inputs and new hyperparameters take effect.
func TestGPTCaptureReplay(t *testing.T) {
	const n, c, oc = 4, 16, 8
	type run struct {
		g                                    *gpu
		px, pw, pb, pout, pw2, py, pbias, ph uintptr
		pp, pg, pm, pv                       uintptr
		plan                                 uint64
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
		r.plan, err = g.d.BF16GemmCreate(cudalib.GemmDesc{M: n, N: oc, K: c, TransB: true, Batch: 1, CType: cudalib.BFloat16, BiasType: cudalib.BFloat16, Epilogue: cudalib.BF16EpiGELUBias})
		g.ok(err)
		return r
	}
	step := func(r *run) {
		r.g.ok(r.g.d.LayerNorm(cudalib.BFloat16, r.pout, 0, 0, r.px, r.pw, r.pb, n, c, lnEps))
		r.g.ok(r.g.d.BF16GemmRun(r.plan, r.py, r.pout, r.pw2, r.pbias, 0, 0))
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
	if got := state(graph); got[0] != 0 {
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
