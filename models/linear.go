package models

import (
	"fmt"
	"slices"

	"github.com/symddp/symddp/compute"
)

// Linear is a fully connected layer with bias and an optional fused
// activation: y = act(x·Wᵀ + b), where W is (Out,In) as in PyTorch and b is
// (Out). With act = compute.ReLU the engine runs bias and ReLU as one pass
// (one kernel on the GPU), and Backward applies the ReLU mask itself.
//
// On an engine that fuses Linear layers (compute.LinearFuser: the CUDA
// engine's cuBLASLt epilogues) the layer runs through the engine's
// compute.FusedLinear instead: bias and activation inside the forward GEMM,
// their gradients inside the backward GEMMs. Fusion reports which path the
// layer took.
type Linear struct {
	// WeightInit initialises W. NewLinear picks HeNormal when the layer ends
	// in ReLU and XavierUniform otherwise; set it before the model's
	// parameters are laid out (for instance HeNormal for a Linear that a
	// separate ReLU layer follows). WeightStd is Normal's deviation.
	WeightInit Init
	WeightStd  float64
	// TiedWeight names another layer's (earlier) parameter that is this
	// layer's W (ParamSpec.TiedTo); empty: W is the layer's own.
	TiedWeight string
	// NoBias leaves the bias out: the layer has W alone.
	NoBias bool

	name    string
	in, out int
	act     compute.Activation

	e          compute.Engine
	w, b       compute.Tensor // parameters
	dw, db     compute.Tensor // their gradients
	x, y, dx   compute.Tensor // last input, output, input gradient
	needInGrad bool
	addW, addB bool // add to dw, db: the parameter is tied and another use wrote them

	fused  compute.FusedLinear // the engine's fused layer (or bf16 plan), nil on the plain path
	unfuse string              // why the layer is not fused (engines with compute.LinearFuser)
	gelu   bool                // bf16: GELU in the epilogue (GELUMLP's c_fc)
}

// NewLinear returns a Linear layer from in to out features whose parameters
// are named name+".weight" and name+".bias".
//
// Set TiedWeight (before the model is built) to make W another layer's
// parameter of the same shape (Out,In): a GPT's output head uses the token
// embedding's table this way.
func NewLinear(name string, in, out int, act compute.Activation) *Linear {
	if in <= 0 || out <= 0 {
		panic(fmt.Sprintf("models: NewLinear(%q, %d, %d): sizes must be positive", name, in, out))
	}
	wInit := XavierUniform
	if act == compute.ReLU {
		wInit = HeNormal
	}
	return &Linear{WeightInit: wInit, name: name, in: in, out: out, act: act}
}

// Params declares W (Out,In) and b (Out).
func (l *Linear) Params() []ParamSpec {
	w := ParamSpec{Name: l.name + ".weight", Shape: []int{l.out, l.in}, Init: l.WeightInit, Std: l.WeightStd,
		FanIn: l.in, FanOut: l.out, TiedTo: l.TiedWeight}
	if l.NoBias {
		return []ParamSpec{w}
	}
	return []ParamSpec{w, {Name: l.name + ".bias", Shape: []int{l.out}, Init: Zeros, FanIn: l.in, FanOut: l.out}}
}

// Build binds W, b and their gradients and allocates y (Batch,Out) and,
// when the input gradient is needed, dx (Batch, In...).
func (l *Linear) Build(b Build) ([]int, error) {
	if n := size(b.In); n != l.in {
		return nil, fmt.Errorf("%s: input of shape %v has %d features, want %d", l.name, b.In, n, l.in)
	}
	if err := checkViews(l.name, l.Params(), b.Params, b.Grads); err != nil {
		return nil, err
	}
	if b.Batch <= 0 {
		return nil, fmt.Errorf("%s: batch %d", l.name, b.Batch)
	}
	l.e = b.Engine
	if b.bf16 {
		return []int{l.out}, l.buildBF16(b)
	}
	l.gelu = false
	l.w, l.dw, l.b, l.db = b.Params[0], b.Grads[0], nil, nil
	if !l.NoBias {
		l.b, l.db = b.Params[1], b.Grads[1]
	}
	l.y = b.Alloc(b.Batch, l.out)
	l.needInGrad = b.NeedInputGrad
	l.dx = nil
	if l.needInGrad {
		l.dx = b.Alloc(append([]int{b.Batch}, b.In...)...)
	}
	l.addW, l.addB = b.AddGrad(0), b.AddGrad(1)
	l.fused, l.unfuse = nil, ""
	if f, ok := l.e.(compute.LinearFuser); ok && (l.addW || l.addB || l.NoBias) {
		l.unfuse = "a tied parameter or no bias, which the fused GEMMs do not take"
	} else if ok {
		fl, err := f.FuseLinear(compute.LinearSpec{
			Name: l.name, Batch: b.Batch, In: l.in, Out: l.out, Act: l.act,
			W: l.w, B: l.b, DW: l.dw, DB: l.db, Y: l.y, DX: l.dx,
		})
		if err != nil {
			l.unfuse = err.Error()
		} else {
			l.fused = fl
		}
	}
	return []int{l.out}, nil
}

// bf16Spec is the layer's bf16 plan as the engine sees it, views left
// out.
func (l *Linear) bf16Spec(b Build) compute.LinearSpec {
	return compute.LinearSpec{Name: l.name, Batch: b.Batch, In: l.in, Out: l.out, Act: l.act, DType: compute.BF16,
		GELU: l.gelu, Residual: b.onto, AddDW: b.AddGrad(0)}
}

// checkBF16 asks the engine for the layer's bf16 plan (bf16Layer).
func (l *Linear) checkBF16(b Build) ([]int, error) {
	if n := size(b.In); n != l.in {
		return nil, fmt.Errorf("%s: input of shape %v has %d features, want %d", l.name, b.In, n, l.in)
	}
	if _, err := compute.Require[compute.LinearFuser](b.Engine, "bf16 Linear"); err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	if b.AddGrad(1) {
		return nil, fmt.Errorf("%s: a tied bias has no bf16 form", l.name)
	}
	if err := compute.CheckBF16(b.Engine, l.bf16Spec(b)); err != nil {
		return nil, fmt.Errorf("%s: %w", l.name, err)
	}
	return []int{l.out}, nil
}

// buildBF16 plans the layer in bf16 over the masters' copies: y, dx bf16
// (and with GELU the pre-activation, in the Scratch when there is one),
// the gradients fp32 into the arena.
func (l *Linear) buildBF16(b Build) error {
	if _, err := l.checkBF16(b); err != nil {
		return err
	}
	half, err := b.bf16Views(l.name, len(l.Params()))
	if err != nil {
		return err
	}
	f, _ := compute.Require[compute.LinearFuser](b.Engine, "bf16 Linear")
	l.w, l.dw, l.b, l.db = half[0], b.Grads[0], nil, nil
	if !l.NoBias {
		l.b, l.db = half[1], b.Grads[1]
	}
	l.y = b.allocOutBF16(l.out)
	l.needInGrad, l.dx = b.NeedInputGrad, nil
	if l.needInGrad {
		l.dx = b.allocGradBF16(l.in)
	}
	l.addW, l.addB, l.unfuse = b.AddGrad(0), false, ""
	s := l.bf16Spec(b)
	s.W, s.B, s.DW, s.DB, s.Y, s.DX = l.w, l.b, l.dw, l.db, l.y, l.dx
	if l.gelu {
		s.Aux = b.allocBF16(l.out)
	}
	if l.fused, err = f.FuseLinear(s); err != nil {
		return fmt.Errorf("%s: %w", l.name, err)
	}
	b.noteLinear(l.b != nil, l.gelu, s.Residual)
	return nil
}

// forwardOnto computes y = r + x·Wᵀ + b in one GEMM (streamOut: a bf16
// layer built to end a residual block).
func (l *Linear) forwardOnto(x, r compute.Tensor) compute.Tensor {
	l.x = x
	l.fused.(compute.ResidualLinear).ForwardOnto(x, r)
	return l.y
}

// Fusion says how the layer runs on its engine since Build: the engine's
// fused path ("fused: ..."), its bf16 plan ("bf16: ..."), "unfused: <why>" on an engine that fuses
// Linear layers but not this one, or "plain" on an engine that has no
// fused layers (the CPU).
func (l *Linear) Fusion() string {
	switch {
	case l.fused != nil:
		return l.fused.Path()
	case l.unfuse != "":
		return "unfused: " + l.unfuse
	}
	return "plain"
}

// Forward computes y = act(x·Wᵀ + b); x is (B,In...) read as (B,In), W is
// (Out,In), y is (B,Out). It keeps x for Backward.
func (l *Linear) Forward(x compute.Tensor) compute.Tensor {
	l.x = x
	if l.fused != nil {
		l.fused.Forward(x)
		return l.y
	}
	l.e.Gemm(false, true, 1, x, l.w, 0, l.y) // y (B,Out) = x (B,In) · Wᵀ (In,Out)
	l.e.BiasAct(l.y, l.b, l.act)
	return l.y
}

// endsStream: without an activation Backward reads dy without writing it
// (the gradient before the activation is dy itself) and does not read y
// (streamEnd).
func (l *Linear) endsStream() bool { return l.act == compute.Identity && !l.gelu }

// Backward takes dy (B,Out), overwrites it with the gradient before the
// activation, and computes dW = dyᵀ·x (Out,In), db = column sums of dy (Out)
// and, unless this is the first layer, dx = dy·W (B,In...).
func (l *Linear) Backward(dy compute.Tensor) compute.Tensor {
	if l.fused != nil {
		return l.fused.Backward(dy, l.x)
	}
	l.e.BiasActBackward(dy, l.y, l.db, l.act, l.addB)
	var beta float32
	if l.addW {
		beta = 1 // a tied weight: add to the other use's gradient
	}
	l.e.Gemm(true, false, 1, dy, l.x, beta, l.dw) // dW (Out,In) = dyᵀ (Out,B) · x (B,In)
	if !l.needInGrad {
		return nil
	}
	l.e.Gemm(false, false, 1, dy, l.w, 0, l.dx) // dx (B,In) = dy (B,Out) · W (Out,In)
	return l.dx
}

// size is the number of elements of a shape.
func size(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// checkViews verifies that a layer got one parameter and one gradient view
// of the declared shape per ParamSpec.
func checkViews(layer string, specs []ParamSpec, params, grads []compute.Tensor) error {
	if len(params) != len(specs) || len(grads) != len(specs) {
		return fmt.Errorf("%s: got %d parameter and %d gradient views, want %d of each",
			layer, len(params), len(grads), len(specs))
	}
	for i, s := range specs {
		for _, v := range []compute.Tensor{params[i], grads[i]} {
			if v == nil || !slices.Equal([]int(v.Shape()), s.Shape) {
				var got any
				if v != nil {
					got = []int(v.Shape())
				}
				return fmt.Errorf("%s: view of %s has shape %v, want %v", layer, s.Name, got, s.Shape)
			}
		}
	}
	return nil
}
