package cudatest

import (
	"fmt"
	"math"
	"sync"

	"github.com/symddp/symddp/internal/cudalib"
)

// GPT is the flash attention kernels of cuda/symddp_gpt.h
// (cudalib.GPTKernels), the last of the GPT-2 kernels' own ABI, emulated on
// a Device: every launcher checks its arguments as the library does (a bad
// one is a *cudalib.GPTError with Code GPTErrArg) and then runs at once, or,
// while the device captures, is recorded and runs when the graph is
// launched, reading the device memory of that moment.
//
// Numerics as bf16.go says: the sums in float64, every bf16 store rounded
// once. The attention backward rounds P and dS to bf16 before their
// products, as the kernels do (check.cu's bf16 emulation); the forward's
// softmax is exact (the kernels' online softmax over tiles with a bf16 P is
// not emulated). The three attention variants compute the same.
//
// Streams are ignored (the device is one in-order stream); scratch is only
// checked to lie inside an allocation, never used.
type GPT struct {
	// a launcher not emulated below fails with cudalib.ErrNotEmulated
	cudalib.UnemulatedGPT

	d *Device

	mu    sync.Mutex
	calls map[string]int
}

var _ cudalib.GPTKernels = (*GPT)(nil)

// GPTKernels returns the device's emulated GPT kernels (one *GPT per
// device: assert the result to *GPT for Calls, LivePlans and
// RejectEpilogue). Give them to cuda.Options.GPTKernels of an engine on
// this device; NewEmulated does.
func (d *Device) GPTKernels() cudalib.GPTKernels {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gpt == nil {
		d.gpt = &GPT{d: d, calls: map[string]int{}}
	}
	return d.gpt
}

// Calls is how many times the launcher named call (its sdg_* name, e.g.
// "sdg_attention_forward") has run: eager calls and graph replays, not
// recordings.
func (g *GPT) Calls(call string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[call]
}

// launch runs f now, or records it while the device captures.
func (g *GPT) launch(call string, f func()) error {
	op := func() {
		g.mu.Lock()
		g.calls[call]++
		g.mu.Unlock()
		f()
	}
	if g.d.capture {
		g.d.recorded = append(g.d.recorded, op)
		return nil
	}
	op()
	return nil
}

func argErr(call, format string, a ...any) error {
	return &cudalib.GPTError{Call: call, Code: cudalib.GPTErrArg, Msg: "emulated: " + fmt.Sprintf(format, a...)}
}

// ---- causal self-attention ----

// attCheck: the wmma kernels' shapes (head size 32 or 64, T a multiple of 64).
func attCheck(call string, b, t, c, nh int) error {
	if b <= 0 || t <= 0 || c <= 0 || nh <= 0 || c%nh != 0 {
		return argErr(call, "B=%d T=%d C=%d NH=%d", b, t, c, nh)
	}
	return wmmaShape(call, b, t, nh, c/nh)
}

// wmmaShape: a head size of 32 or 64, T a multiple of 64, at most 65535
// sequences' heads (the wmma kernels' grid).
func wmmaShape(call string, b, t, nh, hs int) error {
	if hs != 32 && hs != 64 {
		return argErr(call, "head size %d (want 32 or 64)", hs)
	}
	if t%64 != 0 {
		return argErr(call, "T=%d is not a multiple of 64", t)
	}
	if b*nh > 65535 {
		return argErr(call, "B*NH=%d too large", b*nh)
	}
	return nil
}

// mmaCheck: the mma kernels' shapes (head size 64, T a multiple of 128).
func mmaCheck(call string, b, t, c, nh int) error {
	if b <= 0 || t <= 0 || c <= 0 || nh <= 0 || !mmaSupported(t, c, nh) {
		return argErr(call, "B=%d T=%d C=%d NH=%d (want head size 64, T a multiple of 128)", b, t, c, nh)
	}
	if b*nh > 65535 {
		return argErr(call, "B*NH=%d too large", b*nh)
	}
	return nil
}

func mmaSupported(t, c, nh int) bool { return t > 0 && nh > 0 && c == nh*64 && t%128 == 0 }

func (g *GPT) AttentionMMASupported(t, c, nh int) bool { return mmaSupported(t, c, nh) }

// The emulated device is a library built without cuDNN: no plans
// (UnemulatedGPT's AttentionCUDNNSupported is false, its scratch 0), and the
// cuDNN launchers say so, as the library's stubs do.
func (g *GPT) AttentionForwardCUDNN(out, lse, qkv uintptr, b, t, c, nh int, stream uintptr) error {
	return argErr("sdg_attention_forward_cudnn", "this library was built without cuDNN")
}
func (g *GPT) AttentionBackwardCUDNN(dqkv, dout, qkv, out, lse uintptr, b, t, c, nh int, scratch, stream uintptr) error {
	return argErr("sdg_attention_backward_cudnn", "this library was built without cuDNN")
}

func (g *GPT) attentionForward(call string, check func(string, int, int, int, int) error, out, lse, qkv uintptr, b, t, c, nh int) error {
	if err := check(call, b, t, c, nh); err != nil {
		return err
	}
	if lse == 0 || !aligned16(out) || !aligned16(qkv) {
		return argErr(call, "NULL or unaligned pointer")
	}
	return g.launch(call, func() { g.attentionFwd(out, lse, packedIO(qkv, 0, c, nh), b, t, c/nh) })
}

func (g *GPT) AttentionForward(out, lse, qkv uintptr, b, t, c, nh int, stream uintptr) error {
	check := attCheck
	if mmaSupported(t, c, nh) {
		check = mmaCheck
	}
	return g.attentionForward("sdg_attention_forward", check, out, lse, qkv, b, t, c, nh)
}

func (g *GPT) AttentionForwardWMMA(out, lse, qkv uintptr, b, t, c, nh int, stream uintptr) error {
	return g.attentionForward("sdg_attention_forward_wmma", attCheck, out, lse, qkv, b, t, c, nh)
}

func (g *GPT) AttentionForwardMMA(out, lse, qkv uintptr, b, t, c, nh int, stream uintptr) error {
	return g.attentionForward("sdg_attention_forward_mma", mmaCheck, out, lse, qkv, b, t, c, nh)
}

// attIO is where attention's operands lie, as the kernels' sdg_att_io
// (cuda/sd_gpt.cuh): query head h of row r at q + r·ldq + h·hs, its key
// and value at k + r·ldkv + (h/grp)·hs and v likewise; the gradients at
// the same offsets of dq, dk, dv. GPT-2's packed qkv is packedIO.
type attIO struct {
	q, k, v, dq, dk, dv uintptr
	ldq, ldkv, nh, grp  int
}

// packedIO is GPT-2's qkv (B,T,3C) (and dqkv) as an attIO.
func packedIO(qkv, dqkv uintptr, c, nh int) attIO {
	io := attIO{q: qkv, k: qkv + uintptr(2*c), v: qkv + uintptr(4*c), ldq: 3 * c, ldkv: 3 * c, nh: nh, grp: 1}
	if dqkv != 0 {
		io.dq, io.dk, io.dv = dqkv, dqkv+uintptr(2*c), dqkv+uintptr(4*c)
	}
	return io
}

// rows is n rows of width elements ld apart at p (bf16): the span they
// cover, as float64s, indexed as the device memory from p.
func (d *Device) rows(p uintptr, n, ld, width int) []float64 {
	return d.loadBF16(p, (n-1)*ld+width)
}

// attentionFwd: check.cu's attention_fwd_ref (exact softmax in float64 of
// the scores scaled by 1/sqrt(hs)); out rounded to bf16, lse to float32.
// Query head h reads key/value head h/grp.
func (g *GPT) attentionFwd(out, lse uintptr, io attIO, b, t, hs int) {
	d := g.d
	nh, c := io.nh, io.nh*hs
	kw := nh / io.grp * hs
	scale := 1 / math.Sqrt(float64(hs))
	Q, K, V := d.rows(io.q, b*t, io.ldq, c), d.rows(io.k, b*t, io.ldkv, kw), d.rows(io.v, b*t, io.ldkv, kw)
	O, L := d.bf16At(out, b*t*c), d.f32At(lse, b*nh*t)
	p, o := make([]float64, t), make([]float64, hs)
	for bb := 0; bb < b; bb++ {
		for h := 0; h < nh; h++ {
			kh := h / io.grp * hs
			for i := 0; i < t; i++ {
				q := Q[(bb*t+i)*io.ldq+h*hs:][:hs]
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					k := K[(bb*t+j)*io.ldkv+kh:][:hs]
					var s float64
					for x := range q {
						s += q[x] * k[x]
					}
					p[j] = s * scale
					mx = math.Max(mx, p[j])
				}
				var sum float64
				for j := 0; j <= i; j++ {
					p[j] = math.Exp(p[j] - mx)
					sum += p[j]
				}
				L[(bb*nh+h)*t+i] = float32(mx + math.Log(sum))
				clear(o)
				for j := 0; j <= i; j++ {
					v := V[(bb*t+j)*io.ldkv+kh:][:hs]
					for x := range o {
						o[x] += p[j] / sum * v[x]
					}
				}
				for x, ov := range o {
					O[(bb*t+i)*c+h*hs+x] = bf16FromF64(ov)
				}
			}
		}
	}
}

// AttentionBackwardScratchBytes: the library's built without cuDNN (the
// emulated device has none): D (one float per row) and, where the mma kernels
// run, their bf16 dS^T tiles (64 x 64, one per pair of 64-row query and key
// tiles on or below the diagonal).
func (g *GPT) AttentionBackwardScratchBytes(b, t, c, nh int) int {
	if b <= 0 || t <= 0 || nh <= 0 {
		return 0
	}
	rows := b * nh * t
	if mmaSupported(t, c, nh) {
		nt := t / 64
		return rows*4 + b*nh*nt*(nt+1)/2*64*64*2
	}
	return rows * 4
}

func (g *GPT) attentionBackward(call string, check func(string, int, int, int, int) error, dqkv, dout, qkv, out, lse uintptr, b, t, c, nh int, scratch uintptr) error {
	if err := check(call, b, t, c, nh); err != nil {
		return err
	}
	if lse == 0 || scratch == 0 || !aligned16(dqkv) || !aligned16(dout) || !aligned16(qkv) || !aligned16(out) {
		return argErr(call, "NULL or unaligned pointer")
	}
	sb := g.AttentionBackwardScratchBytes(b, t, c, nh)
	return g.launch(call, func() {
		g.d.bytesAt(scratch, sb)
		g.attentionBwd(packedIO(qkv, dqkv, c, nh), dout, out, lse, b, t, c/nh)
	})
}

func (g *GPT) AttentionBackward(dqkv, dout, qkv, out, lse uintptr, b, t, c, nh int, scratch, stream uintptr) error {
	check := attCheck
	if mmaSupported(t, c, nh) {
		check = mmaCheck
	}
	return g.attentionBackward("sdg_attention_backward", check, dqkv, dout, qkv, out, lse, b, t, c, nh, scratch)
}

func (g *GPT) AttentionBackwardWMMA(dqkv, dout, qkv, out, lse uintptr, b, t, c, nh int, scratch, stream uintptr) error {
	return g.attentionBackward("sdg_attention_backward_wmma", attCheck, dqkv, dout, qkv, out, lse, b, t, c, nh, scratch)
}

func (g *GPT) AttentionBackwardMMA(dqkv, dout, qkv, out, lse uintptr, b, t, c, nh int, scratch, stream uintptr) error {
	return g.attentionBackward("sdg_attention_backward_mma", mmaCheck, dqkv, dout, qkv, out, lse, b, t, c, nh, scratch)
}

// attentionBwd: check.cu's attention_bwd_ref with emulate on, from the out
// and lse given: D_i = dout_i . out_i, P = exp(S scale - lse), dS = P (dP -
// D) scale; P and dS rounded to bf16 (from float32, as __float2bfloat16)
// before dV = P^T dout, dK = dS^T Q, dQ = dS K; sums in float64 (a key/value
// head's over its group's query heads in order), every element of dq, dk
// and dv WRITTEN in bf16.
func (g *GPT) attentionBwd(io attIO, dout, out, lse uintptr, b, t, hs int) {
	d := g.d
	nh, c := io.nh, io.nh*hs
	kw := nh / io.grp * hs
	scale := 1 / math.Sqrt(float64(hs))
	Q, K, V := d.rows(io.q, b*t, io.ldq, c), d.rows(io.k, b*t, io.ldkv, kw), d.rows(io.v, b*t, io.ldkv, kw)
	DO, O := d.loadBF16(dout, b*t*c), d.loadBF16(out, b*t*c)
	L := d.f32At(lse, b*nh*t)
	GQ, GK, GV := make([]float64, len(Q)), make([]float64, len(K)), make([]float64, len(V))
	p, dp, pr, ds := make([]float64, t), make([]float64, t), make([]float64, t), make([]float64, t)
	round := func(x float64) float64 { return bf16ToF64(bf16FromF32(float32(x))) }
	for bb := 0; bb < b; bb++ {
		for h := 0; h < nh; h++ {
			kh := h / io.grp * hs
			for i := 0; i < t; i++ {
				qrow := (bb*t+i)*io.ldq + h*hs
				q := Q[qrow:][:hs]
				dO := DO[(bb*t+i)*c+h*hs:][:hs]
				o := O[(bb*t+i)*c+h*hs:][:hs]
				li := float64(L[(bb*nh+h)*t+i])
				var D float64
				for x := range dO {
					D += dO[x] * o[x]
				}
				for j := 0; j <= i; j++ {
					krow := (bb*t+j)*io.ldkv + kh
					k, v := K[krow:][:hs], V[krow:][:hs]
					var s, tt float64
					for x := range q {
						s += q[x] * k[x]
						tt += dO[x] * v[x]
					}
					p[j] = math.Exp(s*scale - li)
					dp[j] = tt
				}
				for j := 0; j <= i; j++ {
					pr[j] = round(p[j])
					ds[j] = round(p[j] * (dp[j] - D) * scale)
				}
				dq := GQ[qrow:][:hs]
				for j := 0; j <= i; j++ {
					krow := (bb*t+j)*io.ldkv + kh
					k := K[krow:][:hs]
					dk, dv := GK[krow:][:hs], GV[krow:][:hs]
					for x := range dq {
						dq[x] += ds[j] * k[x]
						dk[x] += ds[j] * q[x]
						dv[x] += pr[j] * dO[x]
					}
				}
			}
		}
	}
	for _, gr := range []struct {
		dst     uintptr
		sum     []float64
		ld, wid int
	}{{io.dq, GQ, io.ldq, c}, {io.dk, GK, io.ldkv, kw}, {io.dv, GV, io.ldkv, kw}} {
		dst := d.bf16At(gr.dst, len(gr.sum))
		for r := 0; r < b*t; r++ {
			for x := r * gr.ld; x < r*gr.ld+gr.wid; x++ {
				dst[x] = bf16FromF64(gr.sum[x])
			}
		}
	}
}

// gqaCheck: the GQA launchers' shapes (NH a multiple of KVH, head size 32
// or 64, T a multiple of 64).
func gqaCheck(call string, b, t, nh, kvh, hs int) error {
	if b <= 0 || t <= 0 || nh <= 0 || kvh <= 0 || nh%kvh != 0 {
		return argErr(call, "B=%d T=%d NH=%d KVH=%d (want NH a multiple of KVH)", b, t, nh, kvh)
	}
	return wmmaShape(call, b, t, nh, hs)
}

// gqaIO is the GQA launchers' three tensors as an attIO.
func gqaIO(q, k, v, dq, dk, dv uintptr, nh, kvh, hs int) attIO {
	return attIO{q: q, k: k, v: v, dq: dq, dk: dk, dv: dv, ldq: nh * hs, ldkv: kvh * hs, nh: nh, grp: nh / kvh}
}

// GQAForward is sdg_gqa_forward: attentionFwd on the three tensors.
func (g *GPT) GQAForward(out, lse, q, k, v uintptr, b, t, nh, kvh, hs int, stream uintptr) error {
	const call = "sdg_gqa_forward"
	if err := gqaCheck(call, b, t, nh, kvh, hs); err != nil {
		return err
	}
	if lse == 0 || !aligned16(out) || !aligned16(q) || !aligned16(k) || !aligned16(v) {
		return argErr(call, "NULL or unaligned pointer")
	}
	io := gqaIO(q, k, v, 0, 0, 0, nh, kvh, hs)
	return g.launch(call, func() { g.attentionFwd(out, lse, io, b, t, hs) })
}

// GQABackwardScratchBytes: the mma kernels' scratch where they run (hs 64,
// T a multiple of 128), else D's.
func (g *GPT) GQABackwardScratchBytes(b, t, nh, kvh, hs int) int {
	if b <= 0 || t <= 0 || nh <= 0 || kvh <= 0 {
		return 0
	}
	if hs == 64 {
		return g.AttentionBackwardScratchBytes(b, t, nh*hs, nh)
	}
	return b * nh * t * 4
}

// GQABackward is sdg_gqa_backward: attentionBwd on the three tensors.
func (g *GPT) GQABackward(dq, dk, dv, dout, q, k, v, out, lse uintptr, b, t, nh, kvh, hs int, scratch, stream uintptr) error {
	const call = "sdg_gqa_backward"
	if err := gqaCheck(call, b, t, nh, kvh, hs); err != nil {
		return err
	}
	for _, p := range []uintptr{dq, dk, dv, dout, q, k, v, out} {
		if !aligned16(p) {
			return argErr(call, "NULL or unaligned pointer")
		}
	}
	if lse == 0 || scratch == 0 {
		return argErr(call, "NULL lse or scratch")
	}
	io, sb := gqaIO(q, k, v, dq, dk, dv, nh, kvh, hs), g.GQABackwardScratchBytes(b, t, nh, kvh, hs)
	return g.launch(call, func() {
		g.d.bytesAt(scratch, sb)
		g.attentionBwd(io, dout, out, lse, b, t, hs)
	})
}
