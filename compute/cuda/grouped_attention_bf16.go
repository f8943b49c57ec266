package cuda

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

// groupedBF16 is grouped-query causal attention in bf16
// (GroupedAttentionSpec.DType BF16): the GPT's flash attention on packed
// qkv (sdc_grouped_attention_bf16 and its backward with SDC_ATTN_AUTO:
// cuDNN's fused attention where the library has it and its plans build at
// the shape, unless SYMDDP_ATTENTION asks for ours; else our mma.sync
// kernels at a head size of 64 and a context that is a multiple of 128,
// wmma otherwise), query head h reading key/value head h/(Heads/KVHeads)
// where it lies (no copy of K or V per query head). Our kernels sum a
// key/value head's dK and dV over its group's query heads inside the
// kernel, in order, without atomics; cuDNN's graph sums them by a
// reduction. The plan keeps each row's log-sum-exp and the forward's out,
// which the backward reads.
type groupedBF16 struct {
	e    *Engine
	s    compute.GroupedAttentionSpec
	lse  *Tensor // (B,Heads,T) fp32
	out  *Tensor // the last Forward's out
	path string
}

var _ compute.GroupedAttentionPlan = (*groupedBF16)(nil)

func (e *Engine) groupedBF16Plan(s compute.GroupedAttentionSpec) (compute.GroupedAttentionPlan, error) {
	mma, err := e.flashBF16Setup(s, func() (int, error) {
		return e.dev.GroupedAttentionBackwardBF16ScratchBytes(cudalib.AttentionAuto, s.B, s.T, s.Heads, s.KVHeads, s.HeadSize)
	}, s.B, s.T, s.Heads*s.HeadSize, s.Heads)
	if err != nil {
		return nil, err
	}
	cudnn, err := cudnnTaken(func() (bool, error) {
		return e.dev.GroupedAttentionBF16Supported(cudalib.AttentionCUDNN, s.B, s.T, s.Heads, s.KVHeads, s.HeadSize)
	})
	if err != nil {
		return nil, err
	}
	p := &groupedBF16{e: e, s: s, lse: e.Alloc(s.B * s.Heads * s.T).(*Tensor), path: "grouped flash attention (wmma)"}
	if mma {
		p.path = "grouped flash attention (mma.sync)"
	}
	if cudnn {
		p.path = "grouped flash attention (cuDNN)"
	}
	return p, nil
}

// Path says which kernels run.
func (p *groupedBF16) Path() string { return p.path }

// Forward computes out from qkv, keeping lse and out.
func (p *groupedBF16) Forward(out, qkv compute.Tensor) {
	const op = "bf16 grouped attention Forward"
	qd, od := p.e.groupedTensors(op, p.s, compute.BF16, qkv, out)
	s, e := p.s, p.e
	p.out = od
	e.fail(op, e.dev.GroupedAttentionBF16(cudalib.AttentionAuto, od.ptr, p.lse.ptr, qd.ptr, s.B, s.T, s.Heads, s.KVHeads, s.HeadSize))
}

// Backward writes dqkv from dout, the forward's qkv and the out and lse it
// kept.
func (p *groupedBF16) Backward(dqkv, dout, qkv compute.Tensor) {
	const op = "bf16 grouped attention Backward"
	if p.out == nil {
		panic("cuda: " + op + " before Forward")
	}
	qd, dod := p.e.groupedTensors(op, p.s, compute.BF16, qkv, dout)
	dqd, _ := p.e.groupedTensors(op, p.s, compute.BF16, dqkv, dout)
	if anyOverlap(dqd, qd, p.out) {
		compute.PanicShapes("cuda", op, "dqkv overlaps qkv or out", dqd.shape, qd.shape)
	}
	s, e := p.s, p.e
	e.fail(op, e.dev.GroupedAttentionBackwardBF16(cudalib.AttentionAuto, dqd.ptr, dod.ptr, qd.ptr,
		p.out.ptr, p.lse.ptr, s.B, s.T, s.Heads, s.KVHeads, s.HeadSize, e.bf.att.ptr))
}
