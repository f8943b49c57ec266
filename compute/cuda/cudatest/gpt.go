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

// ---- layernorm ----

const lnEps = 1e-5

func lnCheck(call string, n, c int, a, b, p uintptr) error {
	if n <= 0 || c <= 0 || c%8 != 0 {
		return argErr(call, "N=%d C=%d (C must be a positive multiple of 8)", n, c)
	}
	if !aligned16(a) || !aligned16(b) || !aligned16(p) {
		return argErr(call, "NULL or not 16-byte aligned bf16 pointer")
	}
	return nil
}

func (g *GPT) LayernormForward(out, mean, rstd, inp, weight, bias uintptr, n, c int, stream uintptr) error {
	const call = "sdg_layernorm_forward"
	if err := lnCheck(call, n, c, out, inp, weight); err != nil {
		return err
	}
	if !aligned16(bias) {
		return argErr(call, "bias NULL or unaligned")
	}
	return g.launch(call, func() { g.layernormForward(out, mean, rstd, inp, weight, bias, n, c) })
}

// layernormForward: the CPU engine's loop (hostloops.LayerNorm, float32) over
// the widened bf16 input, weight and bias; y rounded to bf16, mean and rstd
// stored when asked for.
func (g *GPT) layernormForward(out, mean, rstd, inp, weight, bias uintptr, n, c int) {
	d := g.d
	y, M, R := make([]float32, n*c), make([]float32, n), make([]float32, n)
	hostloops.LayerNorm(y, M, R, d.widen(inp, n*c), d.widen(weight, c), d.widen(bias, c), n, c, lnEps)
	narrow(d.bf16At(out, n*c), y)
	if mean != 0 {
		copy(d.f32At(mean, n), M)
	}
	if rstd != 0 {
		copy(d.f32At(rstd, n), R)
	}
}

// LayernormBackwardScratchBytes: the library's size (partials of 2C floats
// per block of 4 rows, at most 1024 blocks); the emulation uses none.
func (g *GPT) LayernormBackwardScratchBytes(n, c int) int {
	if n <= 0 || c <= 0 {
		return 0
	}
	return min((n+3)/4, 1024) * 2 * c * 4
}

func (g *GPT) LayernormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd uintptr, n, c int, scratch, stream uintptr) error {
	const call = "sdg_layernorm_backward"
	if err := lnCheck(call, n, c, dinp, dout, inp); err != nil {
		return err
	}
	if !aligned16(weight) || dweight == 0 || dbias == 0 || mean == 0 || rstd == 0 || scratch == 0 {
		return argErr(call, "NULL or unaligned argument")
	}
	if 4*2*c*4 > 200*1024 {
		return argErr(call, "C=%d too large", c)
	}
	sb := g.LayernormBackwardScratchBytes(n, c)
	return g.launch(call, func() {
		g.d.bytesAt(scratch, sb)
		g.layernormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, c)
	})
}

// layernormBackward: the CPU engine's loop (hostloops.LayerNormBackward,
// float32) from the saved fp32 mean and rstd: dinp += the row's gradient
// (widened, added in float32, rounded to bf16 once), dweight and dbias +=
// the sums over rows (summed from zero, then added, as the kernel adds its
// partial sums).
func (g *GPT) layernormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd uintptr, n, c int) {
	d := g.d
	dx := d.widen(dinp, n*c)
	sw, sb := make([]float32, c), make([]float32, c)
	hostloops.LayerNormBackward(dx, sw, sb, d.widen(dout, n*c), d.widen(inp, n*c), d.widen(weight, c),
		d.f32At(mean, n), d.f32At(rstd, n), n, c, true)
	narrow(d.bf16At(dinp, n*c), dx)
	DW, DB := d.f32At(dweight, c), d.f32At(dbias, c)
	for j := range c {
		DW[j] += sw[j]
		DB[j] += sb[j]
	}
}

// ---- GELU ----

func (g *GPT) GeluForward(out, inp uintptr, n int, stream uintptr) error {
	const call = "sdg_gelu_forward"
	if n < 0 || !aligned16(out) || !aligned16(inp) {
		return argErr(call, "n=%d, NULL or unaligned pointer", n)
	}
	if n == 0 {
		return nil
	}
	return g.launch(call, func() {
		y := make([]float32, n)
		hostloops.GELU(y, g.d.widen(inp, n))
		narrow(g.d.bf16At(out, n), y)
	})
}

// GeluBackward: dinp = dout * gelu'(inp), element by element (dinp may be
// dout or inp).
func (g *GPT) GeluBackward(dinp, inp, dout uintptr, n int, stream uintptr) error {
	const call = "sdg_gelu_backward"
	if n < 0 || !aligned16(dinp) || !aligned16(inp) || !aligned16(dout) {
		return argErr(call, "n=%d, NULL or unaligned pointer", n)
	}
	if n == 0 {
		return nil
	}
	return g.launch(call, func() {
		dx := g.d.widen(dout, n)
		hostloops.GELUBackward(dx, dx, g.d.widen(inp, n))
		narrow(g.d.bf16At(dinp, n), dx)
	})
}

// ---- token + position embedding ----

func (g *GPT) EmbedForward(out, tokens, wte, wpe uintptr, b, t, c int, stream uintptr) error {
	const call = "sdg_embed_forward"
	if b <= 0 || t <= 0 || c <= 0 || c%8 != 0 {
		return argErr(call, "B=%d T=%d C=%d (C a multiple of 8)", b, t, c)
	}
	if tokens == 0 || !aligned16(out) || !aligned16(wte) || (wpe != 0 && !aligned16(wpe)) {
		return argErr(call, "NULL or unaligned pointer")
	}
	return g.launch(call, func() {
		d := g.d
		n := b * t
		tok, Y := d.i32At(tokens, n), d.bf16At(out, n*c)
		var P []uint16 // no positions: wte's rows alone
		if wpe != 0 {
			P = d.bf16At(wpe, t*c)
		}
		for i := 0; i < n; i++ {
			if tok[i] < 0 {
				panic(fmt.Sprintf("emulated sdg_embed_forward: token %d at position %d", tok[i], i))
			}
			W := d.bf16At(wte+uintptr(int(tok[i])*c*2), c) // panics past the table
			pos := (i % t) * c
			for j := 0; j < c; j++ {
				if P == nil {
					Y[i*c+j] = bf16FromF64(bf16ToF64(W[j]))
					continue
				}
				Y[i*c+j] = bf16FromF64(bf16ToF64(W[j]) + bf16ToF64(P[pos+j]))
			}
		}
	})
}

func round256(x int) int { return (x + 255) &^ 255 }

// EmbedBackwardScratchBytes: keys and positions as the library keeps them,
// plus room as for its sort; the emulation uses none.
func (g *GPT) EmbedBackwardScratchBytes(b, t, v int) int {
	if b <= 0 || t <= 0 || v <= 0 {
		return 0
	}
	return 4 * round256(4*b*t)
}

func (g *GPT) EmbedBackward(dwte, dwpe, dout, tokens uintptr, b, t, c, v int, scratch uintptr, scratchBytes int, stream uintptr) error {
	const call = "sdg_embed_backward"
	if b <= 0 || t <= 0 || c <= 0 || c%8 != 0 || v <= 0 {
		return argErr(call, "B=%d T=%d C=%d V=%d", b, t, c, v)
	}
	if tokens == 0 || scratch == 0 || !aligned16(dwte) || (dwpe != 0 && !aligned16(dwpe)) || !aligned16(dout) || scratch%256 != 0 {
		return argErr(call, "NULL or unaligned pointer (scratch: 256 bytes)")
	}
	if want := g.EmbedBackwardScratchBytes(b, t, v); scratchBytes < want {
		return argErr(call, "scratch of %d bytes, want %d", scratchBytes, want)
	}
	return g.launch(call, func() {
		g.d.bytesAt(scratch, scratchBytes)
		g.embedBackward(dwte, dwpe, dout, tokens, b, t, c, v)
	})
}

// embedBackward: each token's row of dwte gets the sum of its positions'
// dout rows (increasing position order, float64), each dwpe row (when
// there is a table) the sum over b in order.
func (g *GPT) embedBackward(dwte, dwpe, dout, tokens uintptr, b, t, c, v int) {
	d := g.d
	n := b * t
	tok := d.i32At(tokens, n)
	for i, k := range tok {
		if k < 0 || int(k) >= v {
			panic(fmt.Sprintf("emulated sdg_embed_backward: token %d at position %d, V=%d", k, i, v))
		}
	}
	// The CPU engine's scatter-add (hostloops, float32, rows in position
	// order) into zeroed tables, then added once to the gradients: the
	// kernel sums each token's rows (each position's) and adds the sum.
	dy := d.widen(dout, n*c)
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i % t)
	}
	type table struct {
		grad []float32
		idx  []int32
		rows int
	}
	tables := []table{{d.f32At(dwte, v*c), tok, v}}
	if dwpe != 0 {
		tables = append(tables, table{d.f32At(dwpe, t*c), pos, t})
	}
	for _, u := range tables {
		sum := make([]float32, u.rows*c)
		hostloops.ScatterAddRows(sum, dy, u.idx, c)
		for i, s := range sum {
			u.grad[i] += s
		}
	}
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

// ---- fused softmax cross-entropy, loss statistics ----

func (g *GPT) Classifier(losses, logits, targets uintptr, n, v, vp int, dscale float32, writeGrad int, stream uintptr) error {
	const call = "sdg_classifier"
	if n <= 0 || v <= 0 || vp < v || vp%8 != 0 {
		return argErr(call, "N=%d V=%d Vp=%d (Vp >= V, a multiple of 8)", n, v, vp)
	}
	if losses == 0 || targets == 0 || !aligned16(logits) {
		return argErr(call, "NULL or unaligned pointer")
	}
	return g.launch(call, func() { g.classifier(losses, logits, targets, n, v, vp, dscale, writeGrad != 0) })
}

// classifier: per row, lse = max + log(sum exp(x - max)) over the V real
// columns in float64; loss = lse - x[target] (0 where the target is not in
// [0,V), as the kernel: -1 is the ignored row); with writeGrad the row
// becomes (exp(x - lse) - onehot) * dscale in bf16, 0 in the padding and in
// ignored rows.
func (g *GPT) classifier(losses, logits, targets uintptr, n, v, vp int, dscale float32, writeGrad bool) {
	d := g.d
	Ls, X, Tg := d.f32At(losses, n), d.bf16At(logits, n*vp), d.i32At(targets, n)
	x, gr := make([]float32, v), make([]float32, v)
	for i := 0; i < n; i++ {
		row := X[i*vp : (i+1)*vp]
		tgt := int(Tg[i])
		if tgt < 0 || tgt >= v { // ignored: no loss, no gradient
			Ls[i] = 0
			if writeGrad {
				clear(row)
			}
			continue
		}
		for j := range x {
			x[j] = bf16ToF32(row[j])
		}
		// the CPU engine's row (internal/hostloops): log-sum-exp in
		// float64 from the widened logits, the gradient times dscale
		loss, _ := hostloops.SoftmaxXentRow(x, gr, tgt, dscale)
		Ls[i] = float32(loss)
		if writeGrad {
			narrow(row[:v], gr)
			clear(row[v:])
		}
	}
}

// LossStats: stats[0] += the float64 sum of losses, stats[2] += the count of
// targets other than -1, each rounded to float32 then added.
func (g *GPT) LossStats(stats, losses, targets uintptr, n int, stream uintptr) error {
	const call = "sdg_loss_stats"
	if n <= 0 {
		return argErr(call, "N=%d", n)
	}
	if stats == 0 || losses == 0 || targets == 0 {
		return argErr(call, "NULL pointer")
	}
	return g.launch(call, func() {
		d := g.d
		S, Ls, Tg := d.f32At(stats, 3), d.f32At(losses, n), d.i32At(targets, n)
		var l, c float64
		for i := 0; i < n; i++ {
			l += float64(Ls[i])
			if Tg[i] != -1 {
				c++
			}
		}
		S[0] += float32(l)
		S[2] += float32(c)
	})
}

// ---- fp32 to bf16 ----

func (g *GPT) CastBF16(out, inp uintptr, n int, stream uintptr) error {
	const call = "sdg_cast_bf16"
	if n < 0 {
		return argErr(call, "n=%d", n)
	}
	if n == 0 {
		return nil
	}
	if out == 0 || inp == 0 {
		return argErr(call, "NULL pointer")
	}
	return g.launch(call, func() { g.d.castBF16(out, inp, n) })
}

// ---- AdamW ----

// adamwHyperBytes is sizeof(sdg_adamw_hyper): six floats, step, pad.
const adamwHyperBytes = 32

func (g *GPT) AdamW(params, paramsBF16, grads, m, v, decay uintptr, chunk, n int, hyper, stream uintptr) error {
	const call = "sdg_adamw"
	if n < 0 || params == 0 || grads == 0 || m == 0 || v == 0 || hyper == 0 || (decay != 0 && chunk <= 0) {
		return argErr(call, "n=%d chunk=%d, or a NULL pointer", n, chunk)
	}
	if n == 0 {
		return nil
	}
	return g.launch(call, func() { g.adamw(params, paramsBF16, grads, m, v, decay, chunk, n, hyper) })
}

// adamw: the kernel's float32 operations in its order, the hyperparameters
// read from device memory now: the CPU engine's Adam loop (internal/hostloops,
// AdamW's decoupled decay per chunk) over the gradients times grad_scale:
//
//	g = grad * grad_scale; p *= 1 - lr*wd (where the chunk decays)
//	m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//	p -= (lr / (1 - b1^step)) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
func (g *GPT) adamw(params, paramsBF16, grads, m, v, decay uintptr, chunk, n int, hyper uintptr) {
	d := g.d
	d.bytesAt(hyper, adamwHyperBytes)
	h := d.f32At(hyper, 6)
	lr, b1, b2, eps, wd, gs := h[0], h[1], h[2], h[3], h[4], h[5]
	step := float32(d.i32At(hyper+24, 1)[0])
	bc1 := 1 - float32(math.Pow(float64(b1), float64(step)))
	bc2 := 1 - float32(math.Pow(float64(b2), float64(step)))
	a := hostloops.AdamArgs{Beta1: b1, Beta2: b2, C1: 1 - b1, C2: 1 - b2, Eps: eps, StepSize: lr / bc1,
		BC2Sqrt: float32(math.Sqrt(float64(bc2)))}
	P, G, M, V := d.f32At(params, n), d.f32At(grads, n), d.f32At(m, n), d.f32At(v, n)
	var dec []byte
	if decay != 0 {
		dec = d.bytesAt(decay, (n+chunk-1)/chunk)
	} else {
		chunk = n // one chunk, decaying
	}
	scaled := make([]float32, chunk)
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		for i := lo; i < hi; i++ {
			scaled[i-lo] = G[i] * gs
		}
		a.Decay = 1
		if dec == nil || dec[lo/chunk] != 0 {
			a.Decay = 1 - lr*wd
		}
		hostloops.Adam(P[lo:hi], scaled[:hi-lo], M[lo:hi], V[lo:hi], &a)
	}
	if paramsBF16 != 0 {
		PB := d.bf16At(paramsBF16, n)
		for i, p := range P {
			PB[i] = bf16FromF32(p)
		}
	}
}

// ---- Linear bias gradient ----

// BiasBackwardScratchBytes: the library's (partials of OC floats, one per
// chunk of 64 rows, at most 512); the emulation uses none.
func (g *GPT) BiasBackwardScratchBytes(n, oc int) int {
	if n <= 0 || oc <= 0 {
		return 0
	}
	return min(max((n+63)/64, 1), 512) * oc * 4
}

// BiasBackward: dbias = the float64 column sums of dout.
func (g *GPT) BiasBackward(dbias, dout uintptr, n, oc int, scratch, stream uintptr) error {
	const call = "sdg_bias_backward"
	if n <= 0 || oc <= 0 || oc%8 != 0 {
		return argErr(call, "N=%d OC=%d (OC a multiple of 8)", n, oc)
	}
	if dbias == 0 || scratch == 0 || !aligned16(dout) {
		return argErr(call, "NULL or unaligned pointer")
	}
	sb := g.BiasBackwardScratchBytes(n, oc)
	return g.launch(call, func() {
		d := g.d
		d.bytesAt(scratch, sb)
		DY, DB := d.bf16At(dout, n*oc), d.f32At(dbias, oc)
		s := make([]float64, oc)
		for i := 0; i < n; i++ {
			for j := range s {
				s[j] += bf16ToF64(DY[i*oc+j])
			}
		}
		for j, v := range s {
			DB[j] = float32(v)
		}
	})
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
