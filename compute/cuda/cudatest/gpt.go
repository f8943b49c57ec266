package cudatest

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/hostloops"
)

// GPT is the GPT-2 kernels of cuda/symddp_gpt.h (cudalib.GPTKernels)
// emulated on a Device: every launcher checks its arguments as the library
// does (a bad one is a *cudalib.GPTError with Code GPTErrArg) and then runs
// at once, or, while the device captures, is recorded and runs when the
// graph is launched, reading the device memory of that moment (so AdamW's
// hyperparameters are the ones written before the replay).
//
// Numerics: the spec is the CPU references of cuda/gptcheck/check.cu. bf16
// is stored as uint16 (the upper half of a float32) and read exactly. The
// layer norm, GELU (also in the GEMMs' epilogues), the embedding's
// scatter-add and the classifier's row are the CPU engine's own loops
// (internal/hostloops) over the widened bf16 values, so that the emulator
// keeps no second Go copy of them; the rest of a launcher's arithmetic
// between its loads and its stores is float64 (every sum, including the
// GEMM's products and the softmaxes), except AdamW, which does the
// kernel's float32 operations in its order. Every
// value a kernel stores in bf16 is rounded to nearest even there (a NaN
// becomes 0x7fc0, as check.cu's f2bf); fp32 results are rounded to float32
// where stored, and an fp32 tensor that a kernel ADDS to gets the float64
// sum rounded to float32, then added in float32 (the kernels add their
// fp32 partial sum). The attention backward rounds P and dS to bf16 before
// their products, as the kernels do (check.cu's bf16 emulation); the
// forward's softmax is exact (the kernels' online softmax over tiles with a
// bf16 P is not emulated). The three attention variants compute the same.
//
// Streams are ignored (the device is one in-order stream); workspaces and
// scratch are only checked to lie inside an allocation (and the GPU's
// alignment rules), never used.
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
// "sdg_gemm_run") has run: eager calls and graph replays, not recordings.
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

// aligned16: not NULL and 16-byte aligned, as the bf16 vector loads want.
func aligned16(p uintptr) bool { return p != 0 && p%16 == 0 }

// ---- bf16 ----

// bf16FromF32 rounds f to bf16 to nearest even (check.cu's f2bf).
func bf16FromF32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return 0x7fc0
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// bf16FromF64 rounds x to bf16 to nearest even in one step: x goes to
// float32 rounded to odd (toward zero, the last bit set when inexact),
// which keeps the second rounding from ever meeting a false tie.
func bf16FromF64(x float64) uint16 {
	if math.IsNaN(x) {
		return 0x7fc0
	}
	f := float32(x)
	if float64(f) != x && !math.IsInf(x, 0) {
		u := math.Float32bits(f)
		if math.Abs(float64(f)) > math.Abs(x) {
			u-- // one step toward zero (sign and magnitude)
		}
		f = math.Float32frombits(u | 1)
	}
	return bf16FromF32(f)
}

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
func bf16ToF64(h uint16) float64 { return float64(bf16ToF32(h)) }

// ---- device memory by element ----

func (d *Device) bf16At(p uintptr, n int) []uint16 {
	if n == 0 {
		return nil
	}
	if p%2 != 0 {
		panic(fmt.Sprintf("emulated device: bf16 tensor at odd address %#x", p))
	}
	b := d.bytesAt(p, 2*n)
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
}

func (d *Device) f32At(p uintptr, n int) []float32 {
	if n == 0 {
		return nil
	}
	if p%4 != 0 {
		panic(fmt.Sprintf("emulated device: fp32 tensor at %#x, not 4-byte aligned", p))
	}
	b := d.bytesAt(p, 4*n)
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}

func (d *Device) i32At(p uintptr, n int) []int32 {
	if n == 0 {
		return nil
	}
	if p%4 != 0 {
		panic(fmt.Sprintf("emulated device: int32 tensor at %#x, not 4-byte aligned", p))
	}
	b := d.bytesAt(p, 4*n)
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), n)
}

// loadBF16 is n bf16 at p as float64s.
func (d *Device) loadBF16(p uintptr, n int) []float64 {
	h := d.bf16At(p, n)
	f := make([]float64, n)
	for i, v := range h {
		f[i] = bf16ToF64(v)
	}
	return f
}

// ---- bf16 through the CPU engine's float32 loops ----

// widen is n bf16 at p as float32s (exact).
func (d *Device) widen(p uintptr, n int) []float32 {
	f := make([]float32, n)
	for i, v := range d.bf16At(p, n) {
		f[i] = bf16ToF32(v)
	}
	return f
}

// narrow stores v into the bf16 h, rounded to nearest even.
func narrow(h []uint16, v []float32) {
	for i, x := range v {
		h[i] = bf16FromF64(float64(x))
	}
}

// gelu32 and geluGrad32 apply the CPU engine's GELU (hostloops: the tanh
// approximation) and its derivative to float64 values, in float32.
func gelu32(v []float64) {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	hostloops.GELU(f, append([]float32(nil), f...))
	for i, x := range f {
		v[i] = float64(x)
	}
}

// geluGrad32 multiplies each acc[i] by gelu'(pre[i]) (float32, hostloops).
func geluGrad32(acc, pre []float64) {
	dy, x := make([]float32, len(acc)), make([]float32, len(acc))
	for i := range acc {
		dy[i], x[i] = float32(acc[i]), float32(pre[i])
	}
	hostloops.GELUBackward(dy, dy, x)
	for i, v := range dy {
		acc[i] = float64(v)
	}
}

// ---- causal self-attention ----

// attCheck: the wmma kernels' shapes (head size 32 or 64, T a multiple of 64).
func attCheck(call string, b, t, c, nh int) error {
	if b <= 0 || t <= 0 || c <= 0 || nh <= 0 || c%nh != 0 {
		return argErr(call, "B=%d T=%d C=%d NH=%d", b, t, c, nh)
	}
	if hs := c / nh; hs != 32 && hs != 64 {
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
	return g.launch(call, func() { g.attentionFwd(out, lse, qkv, b, t, c, nh) })
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

// attentionFwd: check.cu's attention_fwd_ref (exact softmax in float64 of
// the scores scaled by 1/sqrt(hs)); out rounded to bf16, lse to float32.
func (g *GPT) attentionFwd(out, lse, qkv uintptr, b, t, c, nh int) {
	d := g.d
	hs := c / nh
	scale := 1 / math.Sqrt(float64(hs))
	QKV := d.loadBF16(qkv, b*t*3*c)
	O, L := d.bf16At(out, b*t*c), d.f32At(lse, b*nh*t)
	p, o := make([]float64, t), make([]float64, hs)
	for bb := 0; bb < b; bb++ {
		for h := 0; h < nh; h++ {
			for i := 0; i < t; i++ {
				q := QKV[(bb*t+i)*3*c+h*hs:][:hs]
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					k := QKV[(bb*t+j)*3*c+c+h*hs:][:hs]
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
					v := QKV[(bb*t+j)*3*c+2*c+h*hs:][:hs]
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
		g.attentionBwd(dqkv, dout, qkv, out, lse, b, t, c, nh)
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
// before dV = P^T dout, dK = dS^T Q, dQ = dS K; sums in float64, dqkv
// WRITTEN in bf16 (every element).
func (g *GPT) attentionBwd(dqkv, dout, qkv, out, lse uintptr, b, t, c, nh int) {
	d := g.d
	hs := c / nh
	scale := 1 / math.Sqrt(float64(hs))
	QKV, DO, O := d.loadBF16(qkv, b*t*3*c), d.loadBF16(dout, b*t*c), d.loadBF16(out, b*t*c)
	L := d.f32At(lse, b*nh*t)
	G := make([]float64, b*t*3*c)
	p, dp, pr, ds := make([]float64, t), make([]float64, t), make([]float64, t), make([]float64, t)
	round := func(x float64) float64 { return bf16ToF64(bf16FromF32(float32(x))) }
	for bb := 0; bb < b; bb++ {
		for h := 0; h < nh; h++ {
			for i := 0; i < t; i++ {
				qrow := (bb*t+i)*3*c + h*hs
				q := QKV[qrow:][:hs]
				dO := DO[(bb*t+i)*c+h*hs:][:hs]
				o := O[(bb*t+i)*c+h*hs:][:hs]
				li := float64(L[(bb*nh+h)*t+i])
				var D float64
				for x := range dO {
					D += dO[x] * o[x]
				}
				for j := 0; j <= i; j++ {
					krow := (bb*t+j)*3*c + c + h*hs
					k, v := QKV[krow:][:hs], QKV[krow+c:][:hs]
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
				dq := G[qrow:][:hs]
				for j := 0; j <= i; j++ {
					krow := (bb*t+j)*3*c + c + h*hs
					k := QKV[krow:][:hs]
					dk, dv := G[krow:][:hs], G[krow+c:][:hs]
					for x := range dq {
						dq[x] += ds[j] * k[x]
						dk[x] += ds[j] * q[x]
						dv[x] += pr[j] * dO[x]
					}
				}
			}
		}
	}
	DQKV := d.bf16At(dqkv, b*t*3*c)
	for i, v := range G {
		DQKV[i] = bf16FromF64(v)
	}
}
