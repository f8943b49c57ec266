package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// embeddingBF16 is GPT-2's embedding in bf16 (compute.Embeddings): row i of
// the output is the token's row plus the position's (sdc_embed_bf16);
// the backward scatters the output's gradient into the fp32 gradients of
// both tables, deterministically (sdc_embed_backward_bf16: each token's rows
// summed in position order, then added). Without a position table (a
// Llama's) the output is the token's row and there is no position
// gradient.
type embeddingBF16 struct {
	e            *Engine
	s            compute.EmbeddingSpec
	wte, wpe     *Tensor // bf16 tables
	dwte, dwpe   *Tensor // fp32 gradients
	scratchBytes int     // what sdc_embed_backward_bf16 needs of the shared scratch
	ids          *Labels // the last Forward's
	addTokens    bool
}

// Embedding plans s (DType BF16: the engine has no fp32 one; the fp32 path
// is Indexing's GatherRows and ScatterAddRows).
func (e *Engine) Embedding(s compute.EmbeddingSpec) (compute.EmbeddingPlan, error) {
	const op = "Embedding"
	if s.DType != compute.BF16 {
		return nil, &compute.MissingOpError{Engine: e.Name(), Op: fmt.Sprintf("%v embedding plan (Indexing has the fp32 lookups)", s.DType), Group: "Embeddings"}
	}
	if err := e.CheckBF16(s); err != nil {
		return nil, err
	}
	p := &embeddingBF16{e: e, s: s, addTokens: s.AddTokens, wte: e.bf16Of(op, s.Tokens), dwte: e.tensorOf(op, s.DTokens)}
	if p.wte.size != s.Vocab*s.C || p.dwte.size != p.wte.size {
		compute.PanicShapes("cuda", op, fmt.Sprintf("want a token table (%d,%d)", s.Vocab, s.C), p.wte.shape, p.dwte.shape)
	}
	if (s.Positions == nil) != (s.DPositions == nil) {
		panic("cuda: " + op + ": a position table without its gradient, or a gradient without its table")
	}
	if s.Positions != nil {
		p.wpe, p.dwpe = e.bf16Of(op, s.Positions), e.tensorOf(op, s.DPositions)
		if p.wpe.size != s.T*s.C || p.dwpe.size != p.wpe.size {
			compute.PanicShapes("cuda", op, fmt.Sprintf("want a position table (%d,%d)", s.T, s.C), p.wpe.shape, p.dwpe.shape)
		}
	}
	if p.dwte.ptr%16 != 0 || p.dwpe.orZero()%16 != 0 {
		return nil, fmt.Errorf("%w: the embedding's gradients are not 16-byte aligned in the arena", compute.ErrBF16Shape)
	}
	bf, err := e.bf16()
	if err != nil {
		return nil, err
	}
	if p.scratchBytes, err = e.dev.EmbedBackwardBF16ScratchBytes(s.B, s.T, s.Vocab); err != nil {
		return nil, err
	}
	if err := e.scratch(&bf.emb, p.scratchBytes); err != nil {
		return nil, err
	}
	return p, nil
}

// Forward writes out (B·T,C) from ids (B·T, each in [0,Vocab)).
func (p *embeddingBF16) Forward(out compute.Tensor, ids compute.Labels) {
	const op = "bf16 Embedding Forward"
	e, s := p.e, p.s
	od := e.bf16Of(op, out)
	if od.size != s.B*s.T*s.C {
		compute.PanicShape("cuda", op, fmt.Sprintf("(%d,%d)", s.B*s.T, s.C), od.shape)
	}
	p.ids = e.checkIDs(op, ids, s.B*s.T, 0, int32(s.Vocab))
	e.fail(op, e.dev.EmbedBF16(od.ptr, p.ids.ptr, p.wte.ptr, p.wpe.orZero(), s.B, s.T, s.C))
}

// Backward writes the tables' gradients from dout (B·T,C): the positions'
// (when there is a table) overwritten, the tokens' added to with AddTokens (a tied head wrote it).
func (p *embeddingBF16) Backward(dout compute.Tensor) {
	const op = "bf16 Embedding Backward"
	e, s := p.e, p.s
	if p.ids == nil {
		panic("cuda: " + op + " before Forward")
	}
	dd := e.bf16Of(op, dout)
	if dd.size != s.B*s.T*s.C {
		compute.PanicShape("cuda", op, fmt.Sprintf("(%d,%d)", s.B*s.T, s.C), dd.shape)
	}
	if !p.addTokens {
		e.fail(op, e.dev.Zero(p.dwte.ptr, p.dwte.bytes()))
	}
	if p.dwpe != nil {
		e.fail(op, e.dev.Zero(p.dwpe.ptr, p.dwpe.bytes()))
	}
	e.fail(op, e.dev.EmbedBackwardBF16(p.dwte.ptr, p.dwpe.orZero(), dd.ptr, p.ids.ptr, s.B, s.T, s.C, s.Vocab, e.bf.emb.ptr, p.scratchBytes))
}

// checkIDs is l as n labels of the engine whose host copies (as SetLabels
// or a pipeline slot last wrote them) lie in [lo, hi); while capturing,
// only their number is checked (a pipeline slot's are checked when filled).
func (e *Engine) checkIDs(op string, l compute.Labels, n int, lo, hi int32) *Labels {
	d := e.labelsOf(op, l)
	if len(d.host) != n {
		panic(fmt.Sprintf("cuda: %s: %d ids, want %d", op, len(d.host), n))
	}
	if e.capture.active {
		return d
	}
	for i, t := range d.host {
		if t < lo || t >= hi {
			compute.PanicLabel("cuda", op, i, int(t), int(hi))
		}
	}
	return d
}
