package cuda

import (
	"errors"
	"fmt"
	"strings"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"

	"github.com/symddp/symddp/internal/settings"
)

// Fused Linear layers. Unfused, a Linear layer y = act(x·Wᵀ + b) costs a
// SGEMM and a bias/activation kernel forward, and a mask-and-column-sum
// kernel and two SGEMMs backward. FuseLinear plans cuBLASLt GEMMs whose
// epilogues do the elementwise work instead (all fp32 without TF32):
//
//   - forward: one GEMM with bias and ReLU (RELU_AUX_BIAS, which also writes
//     the ReLU bit-mask) or with bias only (BIAS, no activation);
//   - a ReLU layer followed by another fused Linear layer (ChainInput, as
//     models.Sequential does): the next layer's input-gradient GEMM applies
//     this layer's ReLU derivative from the mask and writes its bias
//     gradient (DRELU_BGRAD), so this layer's backward is its weight-gradient
//     SGEMM alone;
//   - a layer without activation: its weight-gradient GEMM also writes the
//     bias gradient (cuBLASLt's BGRADB, column sums of dy).
//
// For mlp 784-256-256-10 that is 3 GEMMs forward and 5 backward instead of
// 6 and 8 launches. Each plan (descriptors, layouts, algorithm) is made once
// at build time; the algorithm is the fastest of cuBLASLt's candidates, timed
// then (see sdc_lt_tune in cuda/sd_compute_lt.cu; SYMDDP_CUDA_TUNE=0 keeps the
// heuristic's first choice, for runs that repeat bit for bit). The weight-
// gradient GEMM of a chained layer is planned without epilogue, to be tuned
// too. Whatever cuBLASLt cannot plan on this GPU and library stays
// unfused, part by part, and Path reports what was fused and why the rest
// was not. Operands the plans did not expect (an input less than 16-byte
// aligned) run unfused for that call.

// FusedEnv is the environment variable that switches fused Linear layers
// off when set to 0.
const FusedEnv = settings.CUDAFused

// OverlapEnv is the environment variable that, set to 0, keeps a fused
// layer's weight-gradient GEMM on the stream after its input-gradient GEMM
// instead of beside it on the side stream.
const OverlapEnv = settings.CUDAOverlap

// operandAlign is the alignment in bytes that plans assume of a layer's
// input and of the gradient it receives: every tensor from Alloc, and every
// arena view at an offset of 4 elements, has it.
const operandAlign = 16

var _ compute.LinearFuser = (*Engine)(nil)

func (e *Engine) fusedOff() string {
	return FusedEnv + "=0 or Options.DisableFused"
}

// FusedEnabled reports whether FuseLinear plans fused GEMMs (neither
// Options.DisableFused nor SYMDDP_CUDA_FUSED=0).
func (e *Engine) FusedEnabled() bool { return e.fused }

// fusedLinear is one Linear layer's plans.
type fusedLinear struct {
	e                  *Engine
	name               string
	batch, in, out     int
	act                compute.Activation
	w, b, dw, db, y    *Tensor
	dx                 *Tensor // nil for the first layer
	aux                *Tensor // the ReLU mask the forward writes (nil without one)
	auxLD              int     // its bits per column
	fwd, bgrad, dxPlan uint64  // plans (0: that part is unfused)
	dwPlan             uint64  // the weight-gradient GEMM alone, once chained (0: sgemm)
	fwdEpi             cudalib.Epilogue
	prev               *fusedLinear // the chained layer whose backward dxPlan fuses
	chained            bool         // the next layer's dxPlan fuses this layer's backward
	why                []string     // why parts are not fused

	maskOK bool // the last Forward wrote the mask (fused forward)
	preAct bool // the next layer's Backward gave this one dy before the activation, and DB
}

// FuseLinear plans the fused GEMMs of a Linear layer (see the top of the
// file; a bf16 layer's are linear_bf16.go's, planned whatever
// SYMDDP_CUDA_FUSED says). It fails when fused layers are off or nothing of the layer could be
// planned; parts that cannot be fused run unfused.
func (e *Engine) FuseLinear(s compute.LinearSpec) (compute.FusedLinear, error) {
	switch s.DType {
	case compute.BF16:
		return e.linearBF16Plan(s) // linear_bf16.go
	case compute.F32:
	default:
		return nil, fmt.Errorf("a Linear layer of %v", s.DType)
	}
	if !e.fused {
		return nil, errors.New(e.fusedOff())
	}
	if e.capture.active {
		return nil, errors.New("FuseLinear while capturing a CUDA graph")
	}
	f := &fusedLinear{e: e, name: s.Name, batch: s.Batch, in: s.In, out: s.Out, act: s.Act}
	const op = "FuseLinear"
	f.w, f.b, f.dw, f.db, f.y = e.tensorOf(op, s.W), e.tensorOf(op, s.B), e.tensorOf(op, s.DW), e.tensorOf(op, s.DB), e.tensorOf(op, s.Y)
	f.dx = e.optTensor(op, s.DX)
	if f.w.size != s.Out*s.In || f.b.size != s.Out || f.dw.size != f.w.size || f.db.size != s.Out || f.y.size != s.Batch*s.Out ||
		(f.dx != nil && f.dx.size != s.Batch*s.In) {
		compute.PanicShapes("cuda", op, "the layer's tensors do not fit its sizes", f.w.shape, f.b.shape, f.y.shape)
	}
	if s.Act != compute.Identity && s.Act != compute.ReLU {
		return nil, fmt.Errorf("activation %d", s.Act)
	}
	fwd := cudalib.LtArgs{
		TransB: true, M: s.Batch, N: s.Out, K: s.In, LDA: s.In, LDB: s.In, LDC: s.Out, Bias: f.b.ptr,
		AlignA: operandAlign, AlignB: alignOf(f.w.ptr), AlignC: alignOf(f.y.ptr),
	}
	if s.Act == compute.ReLU {
		f.auxLD = (s.Out + 127) / 128 * 128
		aux := e.Alloc((f.auxLD/8*s.Batch + 3) / 4).(*Tensor)
		fwd.Epilogue, fwd.Aux, fwd.AuxLD = cudalib.EpiBiasReLUAux, aux.ptr, f.auxLD
		if err := f.plan(&f.fwd, fwd); err == nil {
			f.aux, f.fwdEpi = aux, fwd.Epilogue
		} else {
			e.pool.giveBack(aux.ptr, aux.bytes()) // the plan needed its address; nothing else uses it
			f.why = append(f.why, "no ReLU mask: "+err.Error())
			fwd.Epilogue, fwd.Aux, fwd.AuxLD = cudalib.EpiBiasReLU, 0, 0
			if err := f.plan(&f.fwd, fwd); err == nil {
				f.fwdEpi = fwd.Epilogue
			} else {
				f.why = append(f.why, "forward: "+err.Error())
			}
		}
	} else {
		fwd.Epilogue = cudalib.EpiBias
		if err := f.plan(&f.fwd, fwd); err == nil {
			f.fwdEpi = fwd.Epilogue
		} else {
			f.why = append(f.why, "forward: "+err.Error())
		}
		// dW (Out,In) = dyᵀ (Out,B) · x (B,In), db = column sums of dy.
		bg := cudalib.LtArgs{
			Epilogue: cudalib.EpiBGradA, TransA: true, M: s.Out, N: s.In, K: s.Batch, LDA: s.Out, LDB: s.In, LDC: s.In,
			Bias: f.db.ptr, AlignA: operandAlign, AlignB: operandAlign, AlignC: alignOf(f.dw.ptr),
		}
		if err := f.plan(&f.bgrad, bg); err != nil {
			f.why = append(f.why, "bias gradient: "+err.Error())
		}
	}
	if f.fwd == 0 && f.bgrad == 0 {
		return nil, errors.New(strings.Join(f.why, "; "))
	}
	return f, nil
}

// plan makes a cuBLASLt plan into *p, kept for Close.
func (f *fusedLinear) plan(p *uint64, a cudalib.LtArgs) error {
	h, err := f.e.dev.LtPlan(a)
	if err != nil {
		return err
	}
	f.e.plans = append(f.e.plans, h)
	*p = h
	return nil
}

// ChainInput plans this layer's input-gradient GEMM with prev's ReLU
// derivative and bias gradient (DRELU_BGRAD over prev's mask). When
// cuBLASLt cannot plan it, Path says so and both layers keep their own
// backward.
func (f *fusedLinear) ChainInput(p compute.FusedLinear) error {
	prev, ok := p.(*fusedLinear)
	switch {
	case !ok || prev.e != f.e:
		return fmt.Errorf("%T is not a fused layer of this engine", p)
	case f.dx == nil:
		return errors.New("the layer computes no input gradient")
	case f.prev != nil || prev.chained:
		return errors.New("already chained")
	case prev.act != compute.ReLU:
		return errors.New("the previous layer has no ReLU")
	case prev.aux == nil:
		return errors.New("the previous layer's forward keeps no ReLU mask")
	case prev.batch != f.batch || prev.out != f.in:
		return fmt.Errorf("the previous layer's output (%d,%d) is not this layer's input (%d,%d)", prev.batch, prev.out, f.batch, f.in)
	}
	// dx (B,In) = dy (B,Out) · W (Out,In), masked by prev's ReLU; prev's db = column sums.
	a := cudalib.LtArgs{
		Epilogue: cudalib.EpiDReLUBGrad, M: f.batch, N: f.in, K: f.out, LDA: f.out, LDB: f.in, LDC: f.in,
		Bias: prev.db.ptr, Aux: prev.aux.ptr, AuxLD: prev.auxLD,
		AlignA: operandAlign, AlignB: alignOf(f.w.ptr), AlignC: alignOf(f.dx.ptr),
	}
	if err := f.plan(&f.dxPlan, a); err != nil {
		f.why = append(f.why, "dx GEMM with "+prev.name+"'s drelu+bgrad: "+err.Error())
		return err
	}
	f.prev, prev.chained = prev, true
	// prev's backward is then its weight-gradient GEMM alone: plan it too,
	// so that it gets a tuned algorithm like the others (sgemm otherwise).
	// dW (Out,In) = dyᵀ (Out,B) · x (B,In).
	dw := cudalib.LtArgs{
		Epilogue: cudalib.EpiNone, TransA: true, M: prev.out, N: prev.in, K: prev.batch, LDA: prev.out, LDB: prev.in,
		LDC: prev.in, AlignA: operandAlign, AlignB: operandAlign, AlignC: alignOf(prev.dw.ptr),
	}
	if err := prev.plan(&prev.dwPlan, dw); err != nil {
		prev.why = append(prev.why, "dW GEMM: "+err.Error())
	}
	return nil
}

// Forward runs the forward plan, or Gemm and BiasAct.
func (f *fusedLinear) Forward(x compute.Tensor) {
	e := f.e
	xd, rows, cols := e.matrix("Linear forward", x)
	if rows != f.batch || cols != f.in {
		compute.PanicShapes("cuda", "Linear forward", fmt.Sprintf("want an input of (%d,%d)", f.batch, f.in), xd.shape)
	}
	if f.fwd != 0 && aligned(xd.ptr) {
		e.fail("Linear forward", e.dev.LtMatmul(f.fwd, xd.ptr, f.w.ptr, f.y.ptr, false))
		f.maskOK = f.aux != nil
		return
	}
	f.maskOK = false
	e.Gemm(false, true, 1, x, f.w, 0, f.y)
	e.BiasAct(f.y, f.b, f.act)
}

// Backward computes DW, DB and DX from dy (see compute.FusedLinear).
func (f *fusedLinear) Backward(dy, x compute.Tensor) compute.Tensor {
	e := f.e
	dd, rows, cols := e.matrix("Linear backward", dy)
	if rows != f.batch || cols != f.out {
		compute.PanicShapes("cuda", "Linear backward", fmt.Sprintf("want dy of (%d,%d)", f.batch, f.out), dd.shape)
	}
	xd := e.tensorOf("Linear backward", x)
	pre := f.preAct
	f.preAct = false
	// The weight-gradient GEMM's plan: alone when the next layer masked dy
	// and wrote DB (pre), with the bias gradient otherwise; 0 when it runs
	// unfused. The input-gradient GEMM is fused when prev's forward wrote
	// its mask.
	var dw uint64
	if aligned(dd.ptr) && aligned(xd.ptr) {
		if pre {
			dw = f.dwPlan
		} else {
			dw = f.bgrad
		}
	}
	p := f.prev
	dxFused := f.dx != nil && p != nil && f.dxPlan != 0 && p.maskOK && aligned(dd.ptr)
	// Both GEMMs read dy and write different memory: the weight gradient
	// runs on the side stream beside the input gradient, small GEMMs that
	// each fill only part of the GPU. Joined before returning, so that what
	// follows (the previous layer, the allreduce) sees both.
	side := e.overlap && dw != 0 && dxFused
	if side {
		e.fail("Linear backward", e.dev.SideFork())
	}
	switch {
	case dw != 0:
		e.fail("Linear backward", e.dev.LtMatmul(dw, dd.ptr, xd.ptr, f.dw.ptr, side))
	case pre: // the next layer masked dy and wrote DB
		e.Gemm(true, false, 1, dy, x, 0, f.dw)
	default:
		e.BiasActBackward(dy, f.y, f.db, f.act, false)
		e.Gemm(true, false, 1, dy, x, 0, f.dw)
	}
	if f.dx == nil {
		return nil
	}
	if dxFused {
		e.fail("Linear backward", e.dev.LtMatmul(f.dxPlan, dd.ptr, f.w.ptr, f.dx.ptr, false))
		p.preAct = true
	} else {
		e.Gemm(false, false, 1, dy, f.w, 0, f.dx)
	}
	if side {
		e.fail("Linear backward", e.dev.SideJoin())
	}
	return f.dx
}

// Path names the fused parts and why the others are not.
func (f *fusedLinear) Path() string {
	var parts []string
	switch f.fwdEpi {
	case cudalib.EpiBiasReLUAux:
		parts = append(parts, "cublasLt bias+relu fwd (with mask)")
	case cudalib.EpiBiasReLU:
		parts = append(parts, "cublasLt bias+relu fwd")
	case cudalib.EpiBias:
		parts = append(parts, "cublasLt bias fwd")
	default:
		parts = append(parts, "sgemm+kernel fwd")
	}
	switch {
	case f.chained && f.dwPlan != 0:
		parts = append(parts, "drelu+bgrad bwd in the next layer's dx GEMM, cublasLt dW GEMM")
	case f.chained:
		parts = append(parts, "drelu+bgrad bwd in the next layer's dx GEMM")
	case f.bgrad != 0:
		parts = append(parts, "bgrad in the dW GEMM")
	default:
		parts = append(parts, "relu/bias-grad kernel bwd")
	}
	if f.dxPlan != 0 {
		parts = append(parts, "dx GEMM with "+f.prev.name+"'s drelu+bgrad")
	}
	s := "fused: " + strings.Join(parts, ", ")
	if len(f.why) > 0 {
		s += " (unfused: " + strings.Join(f.why, "; ") + ")"
	}
	return s
}

// alignOf is the alignment of a device address in bytes, at most 256.
func alignOf(p uintptr) int {
	a := 256
	for a > 4 && p%uintptr(a) != 0 {
		a /= 2
	}
	return a
}

func aligned(p uintptr) bool { return p%operandAlign == 0 }
