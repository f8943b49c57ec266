package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

var _ compute.Rotary = (*Engine)(nil)

// RotaryEmbedding returns the plan of s: its cos and sin table
// (T, HeadSize/2), the CPU engine's float32 values
// (compute.RotarySpec.Table), uploaded to device memory once per spec, the
// first time it is asked for: the plan holds nothing else, so every later
// call with the same spec (each layer of a model) returns the same plan and
// the table is in device memory once. The plan's rotations (sdc_rotate) do
// the CPU engine's float32 operations, so both engines give the same bits;
// they allocate nothing and can be captured; on bf16 tensors they do the
// same float32 operations on the widened elements, rounding each result to
// bf16. It fails when the head size is odd, T or the head size is below 1,
// or Theta is not above 1.
func (e *Engine) RotaryEmbedding(s compute.RotarySpec) (compute.RotaryPlan, error) {
	if p, ok := e.rotary[s]; ok {
		return p, nil
	}
	cos, sin, err := s.Table()
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	half := s.HeadSize / 2
	p := &rotaryPlan{e: e, s: s, cos: e.Alloc(s.T, half).(*Tensor), sin: e.Alloc(s.T, half).(*Tensor)}
	e.SetTensor(p.cos, cos)
	e.SetTensor(p.sin, sin)
	if e.rotary == nil {
		e.rotary = map[compute.RotarySpec]*rotaryPlan{}
	}
	e.rotary[s] = p
	return p, nil
}

// rotaryPlan holds the device's cos and sin table (T, HeadSize/2) of one
// RotarySpec.
type rotaryPlan struct {
	e        *Engine
	s        compute.RotarySpec
	cos, sin *Tensor
}

// run rotates the first heads of every row of x in place (inverse: the
// other way) after checking it: fp32 or bf16 (the table is fp32 either way).
func (p *rotaryPlan) run(op string, x compute.Tensor, heads int, inverse bool) {
	e := p.e
	xd := e.typedOf(op, x, x.DType())
	ld, width := xd.shape[len(xd.shape)-1], heads*p.s.HeadSize
	if heads < 1 || width > ld || (xd.size/ld)%p.s.T != 0 {
		compute.PanicShapes("cuda", op, fmt.Sprintf("want x (R, W) with R a multiple of %d positions and W at least %d heads of %d", p.s.T, heads, p.s.HeadSize), xd.shape)
	}
	e.fail(op, e.dev.Rotate(libDType(xd.dtype), xd.ptr, xd.ptr, p.cos.ptr, p.sin.ptr, xd.size/ld, width, ld, p.s.HeadSize, p.s.T, inverse))
}

// Forward rotates the first heads of every row of x in place.
func (p *rotaryPlan) Forward(x compute.Tensor, heads int) { p.run("rotary Forward", x, heads, false) }

// Backward rotates the first heads of every row of dx back, in place.
func (p *rotaryPlan) Backward(dx compute.Tensor, heads int) {
	p.run("rotary Backward", dx, heads, true)
}
