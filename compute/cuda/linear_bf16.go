package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

// A Linear layer in bf16 (LinearSpec.DType BF16): its GEMMs are the
// engine's shared bf16 plans (bf16_gemm.go), its bias gradient a kernel of
// its own (sdc_bias_act_backward: cuBLASLt's BGRAD_A epilogue made the dW GEMMs
// slower by more than that kernel takes, 109 against 72 us a block at
// GPT-2's shapes on the H200). Per call:
//
//	forward   y = x·Wᵀ + b            one GEMM, bias in the epilogue
//	          y = gelu(x·Wᵀ + b)      GELU too, the pre-activation kept (aux)
//	          y = r + x·Wᵀ + b        onto a residual stream (ForwardOnto)
//	backward  dW = dyᵀ·x              fp32 into the gradient view
//	          db = column sums of dy  sdc_bias_act_backward
//	          dx = dy·W               with the GELU derivative of the layer
//	                                  before when chained (ChainInput)

// linearBF16 is one bf16 Linear layer's plans.
type linearBF16 struct {
	e                 *Engine
	name              string
	n, in, out        int
	w, b, y, dx       *Tensor // bf16 (b and dx may be nil)
	dw, db            *Tensor // fp32 (db nil without bias)
	aux               *Tensor // bf16 pre-activation of a GELU layer
	fwd, dwPlan, dxPl uintptr
	gelu, residual    bool
	prev              *linearBF16 // the GELU layer whose derivative dxPl applies
	chained           bool        // the next layer's dx GEMM applies this layer's GELU derivative
}

var _ compute.ResidualLinear = (*linearBF16)(nil)

// linearBF16Plan plans s (DType BF16): see the top of the file.
func (e *Engine) linearBF16Plan(s compute.LinearSpec) (compute.FusedLinear, error) {
	const op = "FuseLinear (bf16)"
	if err := e.CheckBF16(s); err != nil {
		return nil, err
	}
	f := &linearBF16{e: e, name: s.Name, n: s.Batch, in: s.In, out: s.Out, gelu: s.GELU, residual: s.Residual}
	f.w, f.y, f.dw = e.bf16Of(op, s.W), e.bf16Of(op, s.Y), e.tensorOf(op, s.DW)
	if s.B != nil {
		f.b, f.db = e.bf16Of(op, s.B), e.tensorOf(op, s.DB)
	}
	if s.DX != nil {
		f.dx = e.bf16Of(op, s.DX)
	}
	if f.w.size != s.Out*s.In || f.dw.size != f.w.size || f.y.size != s.Batch*s.Out || (f.b != nil && (f.b.size != s.Out || f.db.size != s.Out)) ||
		(f.dx != nil && f.dx.size != s.Batch*s.In) {
		compute.PanicShapes("cuda", op, "the layer's tensors do not fit its sizes", f.w.shape, f.dw.shape, f.y.shape)
	}
	if f.dw.ptr%16 != 0 || (f.db != nil && f.db.ptr%16 != 0) {
		return nil, fmt.Errorf("%w: %s's gradient is not 16-byte aligned in the arena", compute.ErrBF16Shape, s.Name)
	}
	if s.GELU && f.b == nil {
		return nil, &compute.MissingOpError{Engine: e.Name(), Op: "bf16 Linear with GELU and no bias", Group: "BF16Tensors"}
	}
	const b16, f32 = cudalib.BFloat16, cudalib.Float32
	epi := cudalib.BF16EpiNone
	switch {
	case s.GELU:
		epi = cudalib.BF16EpiGELUAuxBias
		if s.Aux != nil {
			f.aux = f.check(op, s.Aux, s.Out)
		} else {
			f.aux = e.AllocBF16(s.Batch, s.Out).(*Tensor)
		}
	case f.b != nil:
		epi = cudalib.BF16EpiBias
	}
	var err error
	if f.fwd, err = e.gemmPlan(s.Batch, s.Out, s.In, false, true, b16, epi, s.Residual); err != nil {
		return nil, err
	}
	if f.dwPlan, err = e.gemmPlan(s.Out, s.In, s.Batch, true, false, f32, cudalib.BF16EpiNone, s.AddDW); err != nil {
		return nil, err
	}
	if f.dx != nil {
		if f.dxPl, err = e.gemmPlan(s.Batch, s.In, s.Out, false, false, b16, cudalib.BF16EpiNone, false); err != nil {
			return nil, err
		}
	}
	if f.b != nil {
		bytes, err := e.dev.BiasActBackwardScratchBytes(cudalib.BFloat16, s.Batch, s.Out)
		if err != nil {
			return nil, err
		}
		if err := e.scratch(&e.bf.bias, bytes); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Path says what runs.
func (f *linearBF16) Path() string {
	what := "bf16: cuBLASLt GEMMs"
	switch {
	case f.gelu:
		what += " with bias and GELU in the epilogue"
	case f.b != nil && f.residual:
		what += " with bias and the residual add in the epilogue"
	case f.b != nil:
		what += " with bias in the epilogue"
	case f.residual:
		what += " with the residual add in the epilogue"
	}
	if f.prev != nil {
		what += ", " + f.prev.name + "'s GELU derivative in the input gradient's"
	}
	if f.b != nil {
		what += ", bias gradient by sdc_bias_act_backward"
	}
	return what
}

// check panics unless t is a bf16 (rows, cols) tensor of the engine.
func (f *linearBF16) check(op string, t compute.Tensor, cols int) *Tensor {
	d := f.e.bf16Of(op, t)
	if d.size != f.n*cols {
		compute.PanicShape("cuda", op, fmt.Sprintf("%d rows of %d", f.n, cols), d.shape)
	}
	return d
}

// Forward computes Y = x·Wᵀ + b (GELU'd with GELU) from x (Batch,In).
func (f *linearBF16) Forward(x compute.Tensor) {
	const op = "bf16 Linear Forward"
	if f.residual {
		panic(fmt.Sprintf("cuda: %s: %s lands on a residual stream: call ForwardOnto", op, f.name))
	}
	xd := f.check(op, x, f.in)
	f.e.fail(op, f.e.gemm(f.fwd, f.y.ptr, xd.ptr, f.w.ptr, f.b.orZero(), f.aux.orZero()))
}

// ForwardOnto computes Y = r + x·Wᵀ + b (sdc_bf16_gemm_run_into: r is read, not
// copied first).
func (f *linearBF16) ForwardOnto(x, r compute.Tensor) {
	const op = "bf16 Linear ForwardOnto"
	if !f.residual {
		panic(fmt.Sprintf("cuda: %s: %s was not planned onto a residual stream", op, f.name))
	}
	xd, rd := f.check(op, x, f.in), f.check(op, r, f.out)
	f.e.fail(op, f.e.gemmInto(f.fwd, f.y.ptr, rd.ptr, xd.ptr, f.w.ptr, f.b.orZero()))
}

// Backward writes dW (and db), then dx when the layer has one, from dy
// (Batch,Out) and the forward's x; see the top of the file. A GELU layer
// that is not chained first turns dy into the gradient before its GELU, in
// place.
func (f *linearBF16) Backward(dy, x compute.Tensor) compute.Tensor {
	const op = "bf16 Linear Backward"
	e := f.e
	dyd, xd := f.check(op, dy, f.out), f.check(op, x, f.in)
	if f.gelu && !f.chained {
		e.fail(op, e.dev.GeluBackward(cudalib.BFloat16, dyd.ptr, dyd.ptr, f.aux.ptr, f.n*f.out))
	}
	e.fail(op, e.gemm(f.dwPlan, f.dw.ptr, dyd.ptr, xd.ptr, 0, 0)) // dW (Out,In) = dyᵀ·x
	if f.db != nil {
		e.fail(op, e.dev.BiasActBackward(cudalib.BFloat16, dyd.ptr, 0, f.n, f.out, f.db.ptr, cudalib.Identity, false, e.bf.bias.ptr))
	}
	if f.dx == nil {
		return nil
	}
	var aux uintptr
	if f.prev != nil {
		aux = f.prev.aux.ptr
	}
	e.fail(op, e.gemm(f.dxPl, f.dx.ptr, dyd.ptr, f.w.ptr, 0, aux)) // dx (B,In) = dy·W
	return f.dx
}

// ChainInput plans this layer's input-gradient GEMM with prev's GELU
// derivative (the DGELU epilogue over prev's pre-activation), so that prev's
// Backward receives the gradient before its GELU.
func (f *linearBF16) ChainInput(p compute.FusedLinear) error {
	prev, ok := p.(*linearBF16)
	switch {
	case !ok || prev.e != f.e:
		return fmt.Errorf("%T is not a bf16 Linear of this engine", p)
	case f.dx == nil:
		return fmt.Errorf("%s computes no input gradient", f.name)
	case f.prev != nil || prev.chained:
		return fmt.Errorf("%s or %s is chained already", f.name, prev.name)
	case !prev.gelu:
		return fmt.Errorf("%s has no GELU", prev.name)
	case prev.n != f.n || prev.out != f.in:
		return fmt.Errorf("%s's output (%d,%d) is not %s's input (%d,%d)", prev.name, prev.n, prev.out, f.name, f.n, f.in)
	}
	plan, err := f.e.gemmPlan(f.n, f.in, f.out, false, false, cudalib.BFloat16, cudalib.BF16EpiDGELU, false)
	if err != nil {
		return err
	}
	f.dxPl, f.prev, prev.chained = plan, prev, true
	return nil
}

// orZero is t's address, 0 for no tensor.
func (t *Tensor) orZero() uintptr {
	if t == nil {
		return 0
	}
	return t.ptr
}
