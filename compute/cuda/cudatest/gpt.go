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

	mu     sync.Mutex
	next   uintptr
	lts    map[uintptr]bool
	plans  map[uintptr]gemmPlan
	reject map[cudalib.GPTEpilogue]bool
	calls  map[string]int
}

var _ cudalib.GPTKernels = (*GPT)(nil)

type gemmPlan struct {
	lt uintptr
	d  cudalib.GemmDesc
}

// GPTKernels returns the device's emulated GPT kernels (one *GPT per
// device: assert the result to *GPT for Calls, LivePlans and
// RejectEpilogue). Give them to cuda.Options.GPTKernels of an engine on
// this device; NewEmulated does.
func (d *Device) GPTKernels() cudalib.GPTKernels {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gpt == nil {
		d.gpt = &GPT{d: d, next: 0x5d600000, lts: map[uintptr]bool{}, plans: map[uintptr]gemmPlan{},
			reject: map[cudalib.GPTEpilogue]bool{}, calls: map[string]int{}}
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

// LivePlans is the number of GEMM plans created and not destroyed.
func (g *GPT) LivePlans() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.plans)
}

// RejectEpilogue makes GemmCreate fail with GPTErrBLAS for epi from now on,
// as a cuBLASLt without an algorithm for it does (DGELU_BGRAD, BGRAD_A on
// some versions).
func (g *GPT) RejectEpilogue(epi cudalib.GPTEpilogue) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reject[epi] = true
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

func blasErr(call, format string, a ...any) error {
	return &cudalib.GPTError{Call: call, Code: cudalib.GPTErrBLAS, Msg: "emulated: " + fmt.Sprintf(format, a...)}
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

// ---- cuBLASLt handles and GEMM plans ----

// handle is a fresh fake handle (never 0, never reused); g.mu held.
func (g *GPT) handle() uintptr {
	g.next += 16
	return g.next
}

// LtCreate returns a fake cuBLASLt handle, valid until LtDestroy.
func (g *GPT) LtCreate() (uintptr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := g.handle()
	g.lts[h] = true
	return h, nil
}

func (g *GPT) LtDestroy(lt uintptr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.lts, lt)
}

func epiHasBias(e cudalib.GPTEpilogue) bool {
	return e != cudalib.GPTEpiNone && e != cudalib.GPTEpiDGELU
}

func epiHasAux(e cudalib.GPTEpilogue) bool {
	return e == cudalib.GPTEpiGELUAuxBias || e == cudalib.GPTEpiDGELU || e == cudalib.GPTEpiDGELUBGrad
}

// GemmCreate checks d as sdg_gemm_create does (and lt, which must be a live
// handle of these kernels) and returns a handle to a copy of it.
func (g *GPT) GemmCreate(lt uintptr, d cudalib.GemmDesc) (uintptr, error) {
	const call = "sdg_gemm_create"
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case lt == 0:
		return 0, argErr(call, "NULL argument")
	case !g.lts[lt]:
		return 0, argErr(call, "lt %#x is not a live handle of LtCreate", lt)
	case d.M <= 0 || d.N <= 0 || d.K <= 0 || d.Batch < 1 || d.WorkspaceBytes < 0:
		return 0, argErr(call, "m=%d n=%d k=%d batch=%d workspace %d", d.M, d.N, d.K, d.Batch, d.WorkspaceBytes)
	case d.Epilogue < cudalib.GPTEpiNone || d.Epilogue > cudalib.GPTEpiBGradA:
		return 0, argErr(call, "unknown epilogue %d", d.Epilogue)
	case (d.CType != cudalib.GPTBF16 && d.CType != cudalib.GPTF32) || (d.BiasType != cudalib.GPTBF16 && d.BiasType != cudalib.GPTF32):
		return 0, argErr(call, "c_type %d, bias_type %d (want SDG_BF16 or SDG_F32)", d.CType, d.BiasType)
	case d.Batch > 1 && d.Epilogue != cudalib.GPTEpiNone:
		return 0, argErr(call, "batched GEMMs take no epilogue")
	case d.Batch > 1 && (d.StrideA < 0 || d.StrideB < 0 || d.StrideC < 0):
		return 0, argErr(call, "negative batch strides %d %d %d", d.StrideA, d.StrideB, d.StrideC)
	case epiHasAux(d.Epilogue) && (d.N%8 != 0 || d.CType != cudalib.GPTBF16):
		return 0, argErr(call, "GELU epilogues want n a multiple of 8 and a bf16 C (n=%d)", d.N)
	case g.reject[d.Epilogue]:
		return 0, blasErr(call, "cuBLASLt has no bf16 algorithm for epilogue %d (RejectEpilogue)", d.Epilogue)
	}
	h := g.handle()
	g.plans[h] = gemmPlan{lt: lt, d: d}
	return h, nil
}

func (g *GPT) GemmDestroy(plan uintptr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.plans, plan)
}

// GemmTune runs the plan as GemmRun does (reps times after a warm-up, once
// for all candidates): the emulator has one algorithm, which it keeps.
func (g *GPT) GemmTune(plan, lt, c, a, b, bias, aux, workspace, stream uintptr, candidates, reps int) error {
	if candidates < 1 || reps < 1 {
		return argErr("sdg_gemm_tune", "%d candidates, %d runs", candidates, reps)
	}
	for range reps + 1 {
		if err := g.GemmRun(plan, lt, c, a, b, bias, aux, workspace, stream); err != nil {
			return err
		}
	}
	return nil
}

// GemmTunedNs is 0: the emulator times nothing.
func (g *GPT) GemmTunedNs(plan uintptr, best int) int { return 0 }

// GemmRun checks its arguments as sdg_gemm_run does, and that lt is the
// plan's (and live) and a, b and c 16-byte aligned as the plan's algorithm
// wants (GPTErrBLAS otherwise); the workspace is not used.
func (g *GPT) GemmRun(plan, lt, c, a, b, bias, aux, workspace, stream uintptr) error {
	const call = "sdg_gemm_run"
	p, err := g.gemmPlan(call, plan, lt, c, c, a, b, bias, aux)
	if err != nil {
		return err
	}
	return g.launch(call, func() { g.gemm(p.d, c, c, a, b, bias, aux) })
}

// GemmRunInto: GemmRun of an accumulating plan with C read from c and the
// result written to d.
func (g *GPT) GemmRunInto(plan, lt, d, c, a, b, bias, aux, workspace, stream uintptr) error {
	const call = "sdg_gemm_run_into"
	p, err := g.gemmPlan(call, plan, lt, d, c, a, b, bias, aux)
	if err != nil {
		return err
	}
	if !p.d.Accumulate {
		return argErr(call, "the plan does not accumulate, so it reads no C")
	}
	return g.launch(call, func() { g.gemm(p.d, d, c, a, b, bias, aux) })
}

// gemmPlan checks the arguments of a plan's run (d is written, c read).
func (g *GPT) gemmPlan(call string, plan, lt, d, c, a, b, bias, aux uintptr) (gemmPlan, error) {
	g.mu.Lock()
	p, ok := g.plans[plan]
	live := g.lts[lt]
	g.mu.Unlock()
	e := p.d.Epilogue
	switch {
	case !ok:
		return p, argErr(call, "no plan %#x", plan)
	case lt == 0 || d == 0 || c == 0 || a == 0 || b == 0:
		return p, argErr(call, "NULL argument")
	case lt != p.lt:
		return p, argErr(call, "plan made on lt %#x, run on lt %#x", p.lt, lt)
	case !live:
		return p, argErr(call, "lt %#x destroyed", lt)
	case epiHasBias(e) && bias == 0:
		return p, argErr(call, "epilogue %d without a bias vector", e)
	case epiHasAux(e) && aux == 0:
		return p, argErr(call, "epilogue %d without an aux matrix", e)
	case a%16 != 0 || b%16 != 0 || c%16 != 0 || d%16 != 0:
		return p, blasErr(call, "cublasLtMatmul: operands less than 16-byte aligned (a %#x b %#x c %#x d %#x)", a, b, c, d)
	}
	return p, nil
}

// gemm: row-major D (m,n) = op(A) op(B) with products summed in float64
// (+ C, read at c, when accumulating; d is c but for sdg_gemm_run_into), the
// epilogue applied to that float64 value, D and aux rounded once where stored; bias gradients are float64 sums of the
// values before C's rounding (DGELU_BGRAD) or of op(A)'s elements (BGRAD_A),
// rounded to bias_type where written.
func (g *GPT) gemm(p cudalib.GemmDesc, d, c, a, b, bias, aux uintptr) {
	dev := g.d
	m, n, k := p.M, p.N, p.K
	opA, opBT, acc := make([]float64, m*k), make([]float64, n*k), make([]float64, m*n)
	cSize := 2
	if p.CType == cudalib.GPTF32 {
		cSize = 4
	}
	for z := 0; z < p.Batch; z++ {
		A := dev.bf16At(a+uintptr(2*z*p.StrideA), m*k)
		B := dev.bf16At(b+uintptr(2*z*p.StrideB), k*n)
		off := uintptr(cSize * z * p.StrideC)
		cz, dz := c+off, d+off
		for i := 0; i < m; i++ {
			for l := 0; l < k; l++ {
				if p.TransA {
					opA[i*k+l] = bf16ToF64(A[l*m+i])
				} else {
					opA[i*k+l] = bf16ToF64(A[i*k+l])
				}
			}
		}
		for j := 0; j < n; j++ {
			for l := 0; l < k; l++ {
				if p.TransB {
					opBT[j*k+l] = bf16ToF64(B[j*k+l])
				} else {
					opBT[j*k+l] = bf16ToF64(B[l*n+j])
				}
			}
		}
		for i := 0; i < m; i++ {
			ai := opA[i*k : (i+1)*k]
			for j := 0; j < n; j++ {
				bj := opBT[j*k : (j+1)*k]
				var s float64
				for l, av := range ai {
					s += av * bj[l]
				}
				acc[i*n+j] = s
			}
		}
		if p.Accumulate {
			old := g.loadC(p.CType, cz, m*n)
			for i := range acc {
				acc[i] += old[i]
			}
		}
		g.epilogue(p, acc, opA, bias, aux)
		g.storeC(p.CType, dz, acc)
	}
}

func (g *GPT) epilogue(p cudalib.GemmDesc, acc, opA []float64, bias, aux uintptr) {
	d := g.d
	m, n, k := p.M, p.N, p.K
	switch p.Epilogue {
	case cudalib.GPTEpiBias, cudalib.GPTEpiGELUBias, cudalib.GPTEpiGELUAuxBias:
		bv := g.loadC(p.BiasType, bias, n)
		var X []uint16
		if p.Epilogue == cudalib.GPTEpiGELUAuxBias {
			X = d.bf16At(aux, m*n)
		}
		for i := range acc {
			acc[i] += bv[i%n]
			if X != nil {
				X[i] = bf16FromF64(acc[i])
			}
		}
		if p.Epilogue != cudalib.GPTEpiBias {
			gelu32(acc)
		}
	case cudalib.GPTEpiDGELU, cudalib.GPTEpiDGELUBGrad:
		geluGrad32(acc, d.loadBF16(aux, m*n))
		if p.Epilogue == cudalib.GPTEpiDGELUBGrad {
			s := make([]float64, n)
			for i, v := range acc {
				s[i%n] += v
			}
			g.storeC(p.BiasType, bias, s)
		}
	case cudalib.GPTEpiBGradA:
		s := make([]float64, m)
		for i := range s {
			for _, v := range opA[i*k : (i+1)*k] {
				s[i] += v
			}
		}
		g.storeC(p.BiasType, bias, s)
	}
}

// loadC reads n elements of type t at p.
func (g *GPT) loadC(t cudalib.GPTDType, p uintptr, n int) []float64 {
	if t == cudalib.GPTBF16 {
		return g.d.loadBF16(p, n)
	}
	f := make([]float64, n)
	for i, v := range g.d.f32At(p, n) {
		f[i] = float64(v)
	}
	return f
}

// storeC writes v at p as elements of type t (rounded to nearest even).
func (g *GPT) storeC(t cudalib.GPTDType, p uintptr, v []float64) {
	if t == cudalib.GPTBF16 {
		h := g.d.bf16At(p, len(v))
		for i, x := range v {
			h[i] = bf16FromF64(x)
		}
		return
	}
	f := g.d.f32At(p, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
}
