package cuda

import (
	"fmt"
	"math"
	"os"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/settings"
)

// The fused GPT (compute.GPTFuser): models.GPT's whole forward and backward
// as one planned sequence of the GPT kernels (cuda/symddp_gpt.h, sdg_*), in
// bf16 with fp32 accumulation, over the fp32 master weights and gradients of
// the arenas. What runs, per step:
//
//   - the masters cast to a bf16 copy (one kernel over the parameter span);
//   - embedding, then per layer: LayerNorm, the QKV GEMM with its bias in
//     the epilogue, flash attention (causal, scores never in memory), the
//     attention projection GEMM with bias reading the residual stream as its
//     C (beta = 1) and writing the next one (sdg_gemm_run_into: no copy of
//     the residual first), LayerNorm, the MLP's first GEMM with bias and
//     GELU in the epilogue (the pre-activation kept for backward), its
//     second GEMM with bias onto the residual likewise; the final LayerNorm, the
//     head GEMM against wte, and the fused classifier, which writes the
//     loss per position and overwrites the bf16 logits with their gradient;
//   - backward in reverse: dW GEMMs in fp32 straight into the gradient
//     arena, the bias gradients by sdg_bias_backward beside them (cuBLASLt's
//     BGRAD_A epilogue made the dW GEMMs slower by more than that kernel
//     takes: 109 against 72 us a block at GPT-2's shapes on the H200),
//     input-gradient GEMMs (the MLP's with GELU's derivative in the
//     epilogue), LayerNorm and attention backward, and the embedding's
//     deterministic scatter-add into dwte and dwpe.
//
// Activations are bf16 and kept per layer for backward (about 34·B·T·C
// bytes a layer plus 2·B·T·V for the logits). Every reduction has a fixed
// order, so a step repeats bit for bit. The step's loss scale goes into
// the classifier by value: a captured graph holds it (Graph.Launch refuses
// another, see captureState.frozen).

// gptParamsPerLayer is how many parameters models.GPT declares per layer:
// ln_1 (w, b), c_attn (w, b), attn.c_proj (w, b), ln_2 (w, b), c_fc (w, b),
// mlp.c_proj (w, b).
const gptParamsPerLayer = 12

// Indices of a layer's parameters, after wte and wpe.
const (
	gpLN1W = iota
	gpLN1B
	gpQKVW
	gpQKVB
	gpAPW
	gpAPB
	gpLN2W
	gpLN2B
	gpFCW
	gpFCB
	gpFPW
	gpFPB
)

// gptWorkspace is the cuBLASLt workspace of the plans.
const gptWorkspace = 32 << 20

type gptLayerAct struct {
	ln1, qkv, att, res2, ln2, fpre, fgelu, res3 uintptr // bf16
	mean1, rstd1, mean2, rstd2, lse             uintptr // fp32
}

type gptGemms struct {
	qkv, ap, fc, fp, lm                                                    uintptr
	lmDW, lmDinp, fpDW, fpDinp, fcDW, fcDinp, apDW, apDinp, qkvDW, qkvDinp uintptr
}

// fusedGPT is a planned GPT on the engine.
type fusedGPT struct {
	e  *Engine
	k  cudalib.GPTKernels
	s  compute.GPTShape
	lt uintptr

	base, span uintptr // the parameters' fp32 span [base, base+span)
	wb         uintptr // its bf16 copy (span/2 bytes)
	p, g       []*Tensor
	attention  string // which attention kernels run

	enc, lnf, logits            uintptr // bf16
	meanf, rstdf, losses        uintptr // fp32
	dres, dln, dpre, datt, dqkv uintptr // bf16 backward buffers
	attScratch, lnScratch       uintptr
	embScratch, biasScratch, ws uintptr
	embScratchBytes             int
	layers                      []gptLayerAct
	gm                          gptGemms
	plans                       []uintptr
	descs                       map[uintptr]cudalib.GemmDesc // each plan's, for tuning
	tune, tuneLog               bool                         // time the plans' candidates at first use (SYMDDP_CUDA_TUNE)
	tuned                       map[uintptr]bool
	tuneC                       uintptr // scratch C of the accumulating plans while they are timed
	tuneCBytes                  int
	rowWords                    *Tensor   // NextLogits: one row of bf16 logits as fp32 words
	rowHost                     []float32 // its host copy
	tokens, targets             *Labels   // the last Forward's
	zeroed                      []int     // the parameters whose gradients kernels add to
	closed                      bool
}

var _ compute.GPTFuser = (*Engine)(nil)

// FuseGPT plans models.GPT's forward and backward of shape s over its
// parameter and gradient views (models.GPT's Params order) in bf16; see
// the top of the file.
func (e *Engine) FuseGPT(s compute.GPTShape, params, grads []compute.Tensor) (compute.FusedGPT, error) {
	f, err := e.fuseGPT(s, params, grads)
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		return nil, fmt.Errorf("fused GPT on the GPU: %w", err)
	}
	return f, nil
}

func (e *Engine) fuseGPT(s compute.GPTShape, params, grads []compute.Tensor) (*fusedGPT, error) {
	L, C, NH, T, V, B := s.Layers, s.Width, s.Heads, s.Context, s.Vocab, s.Rows
	switch {
	case L < 1 || NH < 1 || C < 1 || T < 1 || V < 1 || B < 1:
		return nil, fmt.Errorf("shape %+v", s)
	case C%8 != 0:
		return nil, fmt.Errorf("%w: width %d: the bf16 kernels need a multiple of 8", compute.ErrFusedShape, C)
	case C%NH != 0 || (C/NH != 32 && C/NH != 64):
		return nil, fmt.Errorf("%w: width %d over %d heads: the attention kernels need a head size of 32 or 64", compute.ErrFusedShape, C, NH)
	case T%64 != 0:
		return nil, fmt.Errorf("%w: context %d: the attention kernels need a multiple of 64", compute.ErrFusedShape, T)
	case V%8 != 0:
		return nil, fmt.Errorf("%w: vocabulary %d: the classifier needs a multiple of 8 (pad it, as gpt2's 50304)", compute.ErrFusedShape, V)
	case int64(B)*int64(T)*int64(V) > math.MaxInt32 || int64(B)*int64(T)*4*int64(C) > math.MaxInt32:
		return nil, fmt.Errorf("%w: %d sequences of %d positions: too many for the kernels' 32-bit indices", compute.ErrFusedShape, B, T)
	}
	want := 2 + gptParamsPerLayer*L + 2
	if len(params) != want || len(grads) != want {
		return nil, fmt.Errorf("%d parameter and %d gradient views, want %d of each (models.GPT's Params)", len(params), len(grads), want)
	}
	k, err := e.gptKernels()
	if err != nil {
		return nil, err
	}
	f := &fusedGPT{e: e, k: k, s: s}
	sizes := gptParamSizes(s)
	f.p, f.g = make([]*Tensor, want), make([]*Tensor, want)
	lo, hi := ^uintptr(0), uintptr(0)
	for i := range params {
		f.p[i], f.g[i] = e.tensorOf("FuseGPT", params[i]), e.tensorOf("FuseGPT", grads[i])
		if f.p[i].size != sizes[i] || f.g[i].size != sizes[i] {
			return nil, fmt.Errorf("parameter %d has %d elements (gradient %d), want %d: not models.GPT's layout", i, f.p[i].size, f.g[i].size, sizes[i])
		}
		lo, hi = min(lo, f.p[i].ptr), max(hi, f.p[i].ptr+uintptr(f.p[i].bytes()))
	}
	f.base, f.span = lo, hi-lo
	for i, t := range f.p {
		if (t.ptr-lo)%32 != 0 || f.g[i].ptr%16 != 0 {
			return nil, fmt.Errorf("parameter %d is not 8-element aligned in the arena: the bf16 kernels need 16-byte alignment", i)
		}
	}
	if f.lt, err = k.LtCreate(); err != nil {
		return nil, err
	}

	N := B * T
	// Every buffer is asked for even after the device refused one, so that
	// the error says how much the whole model needs.
	var need int64
	var aerr error
	alloc := func(bytes int) uintptr {
		need += int64(bytes)
		if aerr != nil {
			return 0
		}
		p, err := e.tryAlloc("FuseGPT", bytes)
		if err != nil {
			aerr = err
		}
		return p
	}
	bf := func(elems int) uintptr { return alloc(2 * elems) }
	fp := func(elems int) uintptr { return alloc(4 * elems) }
	f.wb = alloc(int(f.span / 2))
	f.enc, f.lnf, f.logits = bf(N*C), bf(N*C), bf(N*V)
	f.meanf, f.rstdf, f.losses = fp(N), fp(N), fp(N)
	f.dres, f.dln, f.dpre, f.datt, f.dqkv = bf(N*C), bf(N*C), bf(4*N*C), bf(N*C), bf(3*N*C)
	f.layers = make([]gptLayerAct, L)
	for l := range f.layers {
		f.layers[l] = gptLayerAct{
			ln1: bf(N * C), qkv: bf(3 * N * C), att: bf(N * C), res2: bf(N * C), ln2: bf(N * C),
			fpre: bf(4 * N * C), fgelu: bf(4 * N * C), res3: bf(N * C),
			mean1: fp(N), rstd1: fp(N), mean2: fp(N), rstd2: fp(N), lse: fp(N * NH),
		}
	}
	f.attScratch = alloc(max(16, k.AttentionBackwardScratchBytes(B, T, C, NH)))
	f.lnScratch = alloc(max(16, k.LayernormBackwardScratchBytes(N, C)))
	f.embScratchBytes = k.EmbedBackwardScratchBytes(B, T, V)
	f.embScratch = alloc(max(16, f.embScratchBytes))
	f.biasScratch = alloc(max(16, k.BiasBackwardScratchBytes(N, 4*C)))
	f.ws = alloc(gptWorkspace)
	if aerr != nil {
		return f, fmt.Errorf("%d sequences of %d tokens need about %.2f GiB of device memory for activations and scratch (a bf16 copy of the weights included), beyond the parameters: %w",
			B, T, float64(need)/(1<<30), aerr)
	}
	f.rowWords, f.rowHost = e.Alloc(V/2).(*Tensor), make([]float32, V/2)
	e.gpts = append(e.gpts, f)
	f.attention = "flash attention (wmma)"
	if k.AttentionMMASupported(T, C, NH) {
		f.attention = "flash attention (mma.sync)"
	}
	if cudnnAttention(k, B, T, C, NH) {
		f.attention = "flash attention (cuDNN)"
	}
	// the gradients kernels add to, zeroed first: wpe, the LayerNorms'
	// (dwte is written by the head's dW GEMM first)
	nf := len(f.p) - 2
	f.zeroed = []int{1, nf, nf + 1}
	for l := range f.layers {
		f.zeroed = append(f.zeroed, lp(l, gpLN1W), lp(l, gpLN1B), lp(l, gpLN2W), lp(l, gpLN2B))
	}
	f.tune = settings.Get(settings.CUDATune) != "0"
	f.tuneLog = settings.Get(settings.CUDATuneLog) == "1"
	if err := f.planGemms(); err != nil {
		return f, err
	}
	return f, nil
}

// gptParamSizes are the element counts of models.GPT's parameters.
func gptParamSizes(s compute.GPTShape) []int {
	C := s.Width
	out := []int{s.Vocab * C, s.Context * C}
	for range s.Layers {
		out = append(out, C, C, 3*C*C, 3*C, C*C, C, C, C, 4*C*C, 4*C, C*4*C, C)
	}
	return append(out, C, C)
}

// plan makes one GEMM plan (must: an error when cuBLASLt has none).
func (f *fusedGPT) plan(m, n, k int, ta, tb bool, ctype cudalib.GPTDType, epi cudalib.GPTEpilogue, acc bool) (uintptr, error) {
	d := cudalib.GemmDesc{M: m, N: n, K: k, TransA: ta, TransB: tb, Batch: 1, CType: ctype, BiasType: ctype,
		Epilogue: epi, Accumulate: acc, WorkspaceBytes: gptWorkspace}
	p, err := f.k.GemmCreate(f.lt, d)
	if err != nil {
		return 0, err
	}
	f.plans = append(f.plans, p)
	if f.descs == nil {
		f.descs = map[uintptr]cudalib.GemmDesc{}
	}
	f.descs[p] = d
	return p, nil
}

func (f *fusedGPT) planGemms() error {
	N, C, V := f.s.Rows*f.s.Context, f.s.Width, f.s.Vocab
	const b16, f32 = cudalib.GPTBF16, cudalib.GPTF32
	g := &f.gm
	var err error
	for _, p := range []struct {
		dst        *uintptr
		m, n, k    int
		ta, tb     bool
		ct         cudalib.GPTDType
		epi        cudalib.GPTEpilogue
		accumulate bool
	}{
		{&g.qkv, N, 3 * C, C, false, true, b16, cudalib.GPTEpiBias, false},
		{&g.ap, N, C, C, false, true, b16, cudalib.GPTEpiBias, true},
		{&g.fc, N, 4 * C, C, false, true, b16, cudalib.GPTEpiGELUAuxBias, false},
		{&g.fp, N, C, 4 * C, false, true, b16, cudalib.GPTEpiBias, true},
		{&g.lm, N, V, C, false, true, b16, cudalib.GPTEpiNone, false},
		{&g.lmDinp, N, C, V, false, false, b16, cudalib.GPTEpiNone, false},
		{&g.lmDW, V, C, N, true, false, f32, cudalib.GPTEpiNone, false},
		{&g.fpDinp, N, 4 * C, C, false, false, b16, cudalib.GPTEpiDGELU, false},
		{&g.fcDinp, N, C, 4 * C, false, false, b16, cudalib.GPTEpiNone, false},
		{&g.apDinp, N, C, C, false, false, b16, cudalib.GPTEpiNone, false},
		{&g.qkvDinp, N, C, 3 * C, false, false, b16, cudalib.GPTEpiNone, false},
		// dW; the bias gradients come from sdg_bias_backward (linearDW)
		{&g.fpDW, C, 4 * C, N, true, false, f32, cudalib.GPTEpiNone, false},
		{&g.fcDW, 4 * C, C, N, true, false, f32, cudalib.GPTEpiNone, false},
		{&g.apDW, C, C, N, true, false, f32, cudalib.GPTEpiNone, false},
		{&g.qkvDW, 3 * C, C, N, true, false, f32, cudalib.GPTEpiNone, false},
	} {
		if *p.dst, err = f.plan(p.m, p.n, p.k, p.ta, p.tb, p.ct, p.epi, p.accumulate); err != nil {
			return err
		}
	}
	return nil
}

// w is the bf16 copy of parameter i; gr its fp32 gradient.
func (f *fusedGPT) w(i int) uintptr  { return f.wb + (f.p[i].ptr-f.base)/2 }
func (f *fusedGPT) gr(i int) uintptr { return f.g[i].ptr }

// lp is the index of layer l's parameter j.
func lp(l, j int) int { return 2 + gptParamsPerLayer*l + j }

// gemm runs plan. Its first run outside a capture (the eager warm-up step
// before the step's graph is recorded) first times cuBLASLt's candidates
// for it on these operands and keeps the fastest (sdg_gemm_tune), unless
// SYMDDP_CUDA_TUNE=0; an accumulating plan (the residual adds) is timed
// into scratch, so that the step's result is what one run gives. Measured
// on the H200 at GPT-2 124M's shapes (B=16), the heuristic's choices
// against the tuned ones: the MLP's input gradient with GELU's derivative
// 197.5 -> 152.0 us, the attention projection's dW 65.4 -> 56.8 us, the
// rest of a block's GEMMs 1-6% (2026-12-02, scripts/gpu-gpt-kernels-check.sh).
// Every PE tunes on its own: that changes the rounding of its local
// gradients, not the replicas (see sdc_lt_tune in cuda/sd_compute_lt.cu).
func (f *fusedGPT) gemm(plan, c, a, b, bias, aux uintptr) error {
	if err := f.tuneFirst(plan, c, a, b, bias, aux); err != nil {
		return err
	}
	return f.k.GemmRun(plan, f.lt, c, a, b, bias, aux, f.ws, f.e.info.Stream)
}

// gemmInto runs an accumulating plan (a residual add) with C read from c and
// the result written to d, tuned at its first use as gemm does.
func (f *fusedGPT) gemmInto(plan, d, c, a, b, bias uintptr) error {
	if err := f.tuneFirst(plan, d, a, b, bias, 0); err != nil {
		return err
	}
	return f.k.GemmRunInto(plan, f.lt, d, c, a, b, bias, 0, f.ws, f.e.info.Stream)
}

// tuneFirst tunes plan at its first run outside a capture (see gemm).
func (f *fusedGPT) tuneFirst(plan, c, a, b, bias, aux uintptr) error {
	if !f.tune || f.tuned[plan] || f.e.capture.active {
		return nil
	}
	return f.tunePlan(plan, c, a, b, bias, aux)
}

// gptTuneCandidates and gptTuneReps: how many of cuBLASLt's candidates a
// plan's tuning times (split-K variants come on top for a dW's underfilling
// choice), and how many runs each.
const gptTuneCandidates, gptTuneReps = 8, 5

func (f *fusedGPT) tunePlan(plan, c, a, b, bias, aux uintptr) error {
	d := f.descs[plan]
	if d.Accumulate {
		bytes := 2 * d.M * d.N
		if d.CType == cudalib.GPTF32 {
			bytes *= 2
		}
		if bytes > f.tuneCBytes {
			f.tuneC, f.tuneCBytes = f.e.alloc("FuseGPT", bytes), bytes
		}
		c = f.tuneC
	}
	if err := f.k.GemmTune(plan, f.lt, c, a, b, bias, aux, f.ws, f.e.info.Stream, gptTuneCandidates, gptTuneReps); err != nil {
		return fmt.Errorf("tuning the %dx%dx%d GEMM: %w", d.M, d.N, d.K, err)
	}
	if f.tuned == nil {
		f.tuned = map[uintptr]bool{}
	}
	f.tuned[plan] = true
	if f.tuneLog {
		acc := ""
		if d.Accumulate {
			acc = ", accumulating"
		}
		fmt.Fprintf(os.Stderr, "cuda: GPT GEMM %dx%dx%d (epilogue %d%s): heuristic's choice %.1f us, kept %.1f us\n",
			d.M, d.N, d.K, d.Epilogue, acc, float64(f.k.GemmTunedNs(plan, 0))/1e3, float64(f.k.GemmTunedNs(plan, 1))/1e3)
	}
	return nil
}

// linearDW writes dW (OC,IC) and db (OC) of a Linear from dout (N,OC) and its input x (N,IC).
func (f *fusedGPT) linearDW(plan, dw, db, dout, x uintptr, oc int) error {
	if err := f.gemm(plan, dw, dout, x, 0, 0); err != nil {
		return err
	}
	return f.k.BiasBackward(db, dout, f.s.Rows*f.s.Context, oc, f.biasScratch, f.e.info.Stream)
}

// Describe says what runs.
func (f *fusedGPT) Describe() string {
	return fmt.Sprintf("fused GPT in bf16 (fp32 masters, gradients and accumulation): cuBLASLt GEMMs with bias/GELU epilogues, %s, bias gradients by sdg_bias_backward, fused classifier", f.attention)
}

// checkLabels checks that the host copies of l (as SetLabels or a
// pipeline slot last wrote them) lie in [lo, V).
func (f *fusedGPT) checkLabels(op string, l *Labels, lo int32) {
	n := f.s.Rows * f.s.Context
	if len(l.host) != n {
		panic(fmt.Sprintf("cuda: %s: %d ids, the fused GPT was planned for %d (%d sequences of %d)", op, len(l.host), n, f.s.Rows, f.s.Context))
	}
	if f.e.capture.active {
		return // a pipeline slot's ids are checked when filled
	}
	V := int32(f.s.Vocab)
	for i, t := range l.host {
		if t < lo || t >= V {
			compute.PanicLabel("cuda", op, i, int(t), int(V))
		}
	}
}

// Forward runs the model to the loss; see compute.FusedGPT.
func (f *fusedGPT) Forward(tokens, targets compute.Labels, scale float32, stats compute.Tensor) {
	const op = "FusedGPT.Forward"
	e := f.e
	tok, tgt, st := e.labelsOf(op, tokens), e.labelsOf(op, targets), e.tensorOf(op, stats)
	if st.size != 3 {
		compute.PanicShape("cuda", op, "stats of 3 elements", st.shape)
	}
	f.checkLabels(op, tok, 0)
	f.checkLabels(op, tgt, -1)
	if e.capture.active {
		e.capture.lossScale(scale)
		e.capture.frozen = true
	}
	f.tokens, f.targets = tok, tgt
	e.fail(op, f.forward(tok.ptr, true))
	s := e.info.Stream
	N := f.s.Rows * f.s.Context
	e.fail(op, f.k.Classifier(f.losses, f.logits, tgt.ptr, N, f.s.Vocab, f.s.Vocab, scale, 1, s))
	e.fail(op, f.k.LossStats(st.ptr, f.losses, tgt.ptr, N, s))
}

// forward enqueues the bf16 cast of the masters (cast) and the model up to
// the logits.
func (f *fusedGPT) forward(tokens uintptr, cast bool) error {
	k, s := f.k, f.e.info.Stream
	B, T, C, NH, N := f.s.Rows, f.s.Context, f.s.Width, f.s.Heads, f.s.Rows*f.s.Context
	if cast {
		if err := k.CastBF16(f.wb, f.base, int(f.span/4), s); err != nil {
			return err
		}
	}
	if err := k.EmbedForward(f.enc, tokens, f.w(0), f.w(1), B, T, C, s); err != nil {
		return err
	}
	x := f.enc
	for l := range f.layers {
		a := &f.layers[l]
		if err := k.LayernormForward(a.ln1, a.mean1, a.rstd1, x, f.w(lp(l, gpLN1W)), f.w(lp(l, gpLN1B)), N, C, s); err != nil {
			return err
		}
		if err := f.gemm(f.gm.qkv, a.qkv, a.ln1, f.w(lp(l, gpQKVW)), f.w(lp(l, gpQKVB)), 0); err != nil {
			return err
		}
		if err := k.AttentionForward(a.att, a.lse, a.qkv, B, T, C, NH, s); err != nil {
			return err
		}
		if err := f.gemmInto(f.gm.ap, a.res2, x, a.att, f.w(lp(l, gpAPW)), f.w(lp(l, gpAPB))); err != nil {
			return err
		}
		if err := k.LayernormForward(a.ln2, a.mean2, a.rstd2, a.res2, f.w(lp(l, gpLN2W)), f.w(lp(l, gpLN2B)), N, C, s); err != nil {
			return err
		}
		if err := f.gemm(f.gm.fc, a.fgelu, a.ln2, f.w(lp(l, gpFCW)), f.w(lp(l, gpFCB)), a.fpre); err != nil {
			return err
		}
		if err := f.gemmInto(f.gm.fp, a.res3, a.res2, a.fgelu, f.w(lp(l, gpFPW)), f.w(lp(l, gpFPB))); err != nil {
			return err
		}
		x = a.res3
	}
	nf := len(f.p) - 2
	if err := k.LayernormForward(f.lnf, f.meanf, f.rstdf, x, f.w(nf), f.w(nf+1), N, C, s); err != nil {
		return err
	}
	return f.gemm(f.gm.lm, f.logits, f.lnf, f.w(0), 0, 0)
}

// Backward propagates the last Forward's loss into the gradients.
func (f *fusedGPT) Backward() {
	if f.tokens == nil {
		panic("cuda: FusedGPT.Backward before Forward")
	}
	f.e.fail("FusedGPT.Backward", f.backward())
}

func (f *fusedGPT) backward() error {
	e, k, s := f.e, f.k, f.e.info.Stream
	B, T, C, NH, N, V := f.s.Rows, f.s.Context, f.s.Width, f.s.Heads, f.s.Rows*f.s.Context, f.s.Vocab
	nf := len(f.p) - 2
	for _, i := range f.zeroed {
		if err := e.dev.Zero(f.g[i].ptr, f.g[i].bytes()); err != nil {
			return err
		}
	}
	top := f.enc
	if len(f.layers) > 0 {
		top = f.layers[len(f.layers)-1].res3
	}
	if err := f.gemm(f.gm.lmDW, f.gr(0), f.logits, f.lnf, 0, 0); err != nil { // dwte (V,C) written
		return err
	}
	if err := f.gemm(f.gm.lmDinp, f.dln, f.logits, f.w(0), 0, 0); err != nil {
		return err
	}
	if err := e.dev.Zero(f.dres, 2*N*C); err != nil {
		return err
	}
	if err := k.LayernormBackward(f.dres, f.gr(nf), f.gr(nf+1), f.dln, top, f.w(nf), f.meanf, f.rstdf, N, C, f.lnScratch, s); err != nil {
		return err
	}
	for l := len(f.layers) - 1; l >= 0; l-- {
		a := &f.layers[l]
		x := f.enc
		if l > 0 {
			x = f.layers[l-1].res3
		}
		fp, fc, ap, qk := lp(l, gpFPW), lp(l, gpFCW), lp(l, gpAPW), lp(l, gpQKVW)
		if err := f.linearDW(f.gm.fpDW, f.gr(fp), f.gr(fp+1), f.dres, a.fgelu, C); err != nil {
			return err
		}
		if err := f.gemm(f.gm.fpDinp, f.dpre, f.dres, f.w(fp), 0, a.fpre); err != nil {
			return err
		}
		if err := f.linearDW(f.gm.fcDW, f.gr(fc), f.gr(fc+1), f.dpre, a.ln2, 4*C); err != nil {
			return err
		}
		if err := f.gemm(f.gm.fcDinp, f.dln, f.dpre, f.w(fc), 0, 0); err != nil {
			return err
		}
		if err := k.LayernormBackward(f.dres, f.gr(lp(l, gpLN2W)), f.gr(lp(l, gpLN2B)), f.dln, a.res2,
			f.w(lp(l, gpLN2W)), a.mean2, a.rstd2, N, C, f.lnScratch, s); err != nil {
			return err
		}
		if err := f.linearDW(f.gm.apDW, f.gr(ap), f.gr(ap+1), f.dres, a.att, C); err != nil {
			return err
		}
		if err := f.gemm(f.gm.apDinp, f.datt, f.dres, f.w(ap), 0, 0); err != nil {
			return err
		}
		if err := k.AttentionBackward(f.dqkv, f.datt, a.qkv, a.att, a.lse, B, T, C, NH, f.attScratch, s); err != nil {
			return err
		}
		if err := f.linearDW(f.gm.qkvDW, f.gr(qk), f.gr(qk+1), f.dqkv, a.ln1, 3*C); err != nil {
			return err
		}
		if err := f.gemm(f.gm.qkvDinp, f.dln, f.dqkv, f.w(qk), 0, 0); err != nil {
			return err
		}
		if err := k.LayernormBackward(f.dres, f.gr(lp(l, gpLN1W)), f.gr(lp(l, gpLN1B)), f.dln, x,
			f.w(lp(l, gpLN1W)), a.mean1, a.rstd1, N, C, f.lnScratch, s); err != nil {
			return err
		}
	}
	return k.EmbedBackward(f.gr(0), f.gr(1), f.dres, f.tokens.ptr, B, T, C, V, f.embScratch, f.embScratchBytes, s)
}

// NextLogits runs the model on tokens (Rows·Context ids; the masters cast
// anew) and copies row row of its logits (Vocab) to dst as float32. It
// waits for the device.
func (f *fusedGPT) NextLogits(tokens compute.Labels, row int, dst []float32) error {
	const op = "FusedGPT.NextLogits"
	e := f.e
	tok := e.labelsOf(op, tokens)
	f.checkLabels(op, tok, 0)
	V := f.s.Vocab
	if row < 0 || row >= f.s.Rows*f.s.Context || len(dst) < V {
		return fmt.Errorf("cuda: %s: row %d of %d, room for %d of %d logits", op, row, f.s.Rows*f.s.Context, len(dst), V)
	}
	if err := f.forward(tok.ptr, true); err != nil {
		e.fail(op, err)
		return e.err
	}
	if err := e.dev.Copy(f.rowWords.ptr, f.logits+uintptr(2*row*V), 2*V); err != nil {
		e.fail(op, err)
		return e.err
	}
	e.ReadTensor(f.rowHost, f.rowWords)
	if err := e.Sync(); err != nil {
		return err
	}
	for i, w := range f.rowHost { // little endian: element 2i is the low half of word i
		u := math.Float32bits(w)
		dst[2*i], dst[2*i+1] = math.Float32frombits(u<<16), math.Float32frombits(u&0xffff0000)
	}
	return nil
}

// Close releases the plans and the cuBLASLt handle; the device memory
// stays with the engine's pool until the engine closes.
func (f *fusedGPT) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	for _, p := range f.plans {
		f.k.GemmDestroy(p)
	}
	f.plans = nil
	if f.lt != 0 {
		f.k.LtDestroy(f.lt)
		f.lt = 0
	}
	return nil
}
