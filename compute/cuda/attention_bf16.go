package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/settings"
)

// attentionBF16 is causal self-attention in bf16 (AttentionSpec.DType
// BF16): flash attention, the scores never in memory. The library's entry
// points (sdc_attention_bf16, sdc_attention_backward_bf16 with
// SDC_ATTN_AUTO) run cuDNN's fused attention where the library was built
// with it and its plans build at the shape (unless SYMDDP_ATTENTION asks
// for ours), else the project's kernels: mma.sync at a head size of 64 and
// a context that is a multiple of 128, wmma otherwise (the rule of
// cuda/symddp_compute.h). The plan keeps each row's log-sum-exp (lse) and
// the forward's out, which the backward reads.
type attentionBF16 struct {
	e    *Engine
	s    compute.AttentionSpec
	lse  *Tensor // (B,Heads,T) fp32
	out  *Tensor // the last Forward's out
	path string
}

func (e *Engine) attentionBF16Plan(s compute.AttentionSpec) (compute.AttentionPlan, error) {
	mma, err := e.flashBF16Setup(s, func() (int, error) {
		return e.dev.AttentionBackwardBF16ScratchBytes(cudalib.AttentionAuto, s.B, s.T, s.C, s.Heads)
	}, s.B, s.T, s.C, s.Heads)
	if err != nil {
		return nil, err
	}
	cudnn, err := cudnnAttention(e.dev, s.B, s.T, s.C, s.Heads)
	if err != nil {
		return nil, err
	}
	p := &attentionBF16{e: e, s: s, lse: e.Alloc(s.B * s.Heads * s.T).(*Tensor), path: "flash attention (wmma)"}
	if mma {
		p.path = "flash attention (mma.sync)"
	}
	if cudnn {
		p.path = "flash attention (cuDNN)"
	}
	return p, nil
}

// flashBF16Setup is what both flash attention plans (this file's and
// grouped_attention_bf16.go's) do at Build: check the bf16 spec, grow the
// engine's backward scratch, shared by the plans, to scratchBytes, and say
// whether the mma.sync kernels take the shape (B, T, width C, heads).
func (e *Engine) flashBF16Setup(s compute.OpSpec, scratchBytes func() (int, error), b, t, c, heads int) (mma bool, err error) {
	if err := e.CheckBF16(s); err != nil {
		return false, err
	}
	bf, err := e.bf16()
	if err != nil {
		return false, err
	}
	bytes, err := scratchBytes()
	if err != nil {
		return false, err
	}
	if err := e.scratch(&bf.att, bytes); err != nil {
		return false, err
	}
	return e.dev.AttentionBF16Supported(cudalib.AttentionMMA, b, t, c, heads)
}

// Path says which kernels run.
func (p *attentionBF16) Path() string { return p.path }

// check returns the bf16 (B,T,3C) and (B,T,C) tensors of a call.
func (p *attentionBF16) check(op string, wide, narrow compute.Tensor) (wd, nd *Tensor) {
	s := p.s
	wd, nd = p.e.bf16Of(op, wide), p.e.bf16Of(op, narrow)
	if wd.size != s.B*s.T*3*s.C || nd.size != s.B*s.T*s.C {
		compute.PanicShapes("cuda", op, fmt.Sprintf("want (B,T,3C) and (B,T,C) for B=%d T=%d C=%d", s.B, s.T, s.C), wd.shape, nd.shape)
	}
	if overlap(wd, nd) {
		compute.PanicShapes("cuda", op, "the tensors overlap", wd.shape, nd.shape)
	}
	return wd, nd
}

// Forward computes out (B,T,C) from qkv (B,T,3C), keeping lse and out.
func (p *attentionBF16) Forward(out, qkv compute.Tensor) {
	const op = "bf16 attention Forward"
	qd, od := p.check(op, qkv, out)
	s, e := p.s, p.e
	p.out = od
	e.fail(op, e.dev.AttentionBF16(cudalib.AttentionAuto, od.ptr, p.lse.ptr, qd.ptr, s.B, s.T, s.C, s.Heads))
}

// Backward writes dqkv (B,T,3C) from dout (B,T,C), the forward's qkv and
// the out and lse it kept.
func (p *attentionBF16) Backward(dqkv, dout, qkv compute.Tensor) {
	const op = "bf16 attention Backward"
	if p.out == nil {
		panic("cuda: " + op + " before Forward")
	}
	dqd, dod := p.check(op, dqkv, dout)
	qd, _ := p.check(op, qkv, dout)
	s, e := p.s, p.e
	e.fail(op, e.dev.AttentionBackwardBF16(cudalib.AttentionAuto, dqd.ptr, dod.ptr, qd.ptr, p.out.ptr, p.lse.ptr, s.B, s.T, s.C, s.Heads, e.bf.att.ptr))
}

// cudnnSupport is the question cudnnAttention asks of a device.
type cudnnSupport interface {
	AttentionBF16Supported(impl cudalib.AttentionImpl, b, t, c, nh int) (bool, error)
}

// cudnnAttention says whether the library's attention entry points take
// cuDNN's fused attention at this shape (SDC_ATTN_AUTO's rule in
// cuda/symddp_compute.h): where the library was built with cuDNN and its
// plans build, unless SYMDDP_ATTENTION asks for ours.
func cudnnAttention(d cudnnSupport, B, T, C, NH int) (bool, error) {
	return cudnnTaken(func() (bool, error) { return d.AttentionBF16Supported(cudalib.AttentionCUDNN, B, T, C, NH) })
}

// cudnnTaken is SDC_ATTN_AUTO's rule for either attention: cuDNN's where
// supported says its plans build, unless SYMDDP_ATTENTION asks for ours.
func cudnnTaken(supported func() (bool, error)) (bool, error) {
	switch settings.Get(settings.Attention) {
	case "", "auto", "cudnn":
		return supported()
	}
	return false, nil
}
