package cuda

// causalGemms runs the T×T products of the fp32 attention plans
// (attentionPlan, groupedPlan) block by block, so that they skip the
// blocks above the diagonal, where the causal probabilities and their
// gradient are zero: the rows of the scores (and of the products that read
// P or dS by rows) go in blocks of tb, block [r0, r1) stopping at key r1;
// the products that read them transposed (dV = Pᵀ·dO, dK = dSᵀ·Q) go by
// blocks of columns [c0, c1), starting at row c0. Two blocks do 3/4 of the
// whole squares' work: GPT-2 124M's fp32 step at batch 8 went from 43,716
// to 44,325 tokens/s on an H100 (2026-12-06). Four (10/16 of the work) were
// slower than one: cuBLAS took 32×32 tiles for the 256-row pieces, and
// the attention's products went from 38 to 52 ms a step. The entries of a
// diagonal block above the diagonal are the softmaxes' zeros; those past a
// block's end are never written or read. Every call is one strided batch of batch
// products, their operands the strides apart that the plan gives; P and
// its gradient are (T,T) with a leading dimension of T.
type causalGemms struct {
	e                *Engine
	T, hs, tb, batch int
}

// newCausalGemms splits T into two blocks, the first a multiple of 64
// rows (one block up to T = 64).
func newCausalGemms(e *Engine, T, hs, batch int) causalGemms {
	tb := ((T+1)/2 + 63) / 64 * 64
	return causalGemms{e: e, T: T, hs: hs, tb: tb, batch: batch}
}

// rowsABt: C[r0:r1, 0:r1] = alpha · A[r0:r1]·B[0:r1]ᵀ (S = scale·Q·Kᵀ,
// dP = dO·Vᵀ): A and B (T,hs) with leading dimensions lda and ldb, C the
// (T,T) scores.
func (g causalGemms) rowsABt(op string, alpha float32, a uintptr, lda, sa int, b uintptr, ldb, sb int, c uintptr, sc int) {
	for r0 := 0; r0 < g.T; r0 += g.tb {
		r1 := min(g.T, r0+g.tb)
		g.e.fail(op, g.e.dev.GemmBatched(false, true, r1-r0, r1, g.hs, alpha, at(a, r0*lda), lda, sa, b, ldb, sb,
			0, at(c, r0*g.T), g.T, sc, g.batch))
	}
}

// rowsPB: C[r0:r1] = alpha · P[r0:r1, 0:r1]·B[0:r1] (out = P·V,
// dQ = scale·dS·K): C and B (T,hs) with leading dimensions ldc and ldb.
func (g causalGemms) rowsPB(op string, alpha float32, p uintptr, sp int, b uintptr, ldb, sb int, c uintptr, ldc, sc int) {
	for r0 := 0; r0 < g.T; r0 += g.tb {
		r1 := min(g.T, r0+g.tb)
		g.e.fail(op, g.e.dev.GemmBatched(false, false, r1-r0, g.hs, r1, alpha, at(p, r0*g.T), g.T, sp, b, ldb, sb,
			0, at(c, r0*ldc), ldc, sc, g.batch))
	}
}

// colsPtB: C[c0:c1] = alpha · P[c0:T, c0:c1]ᵀ·B[c0:T] + beta · C[c0:c1]
// (dV (+)= Pᵀ·dO, dK (+)= scale·dSᵀ·Q).
func (g causalGemms) colsPtB(op string, alpha float32, p uintptr, sp int, b uintptr, ldb, sb int, beta float32, c uintptr, ldc, sc int) {
	for c0 := 0; c0 < g.T; c0 += g.tb {
		c1 := min(g.T, c0+g.tb)
		g.e.fail(op, g.e.dev.GemmBatched(true, false, c1-c0, g.hs, g.T-c0, alpha, at(p, c0*g.T+c0), g.T, sp,
			at(b, c0*ldb), ldb, sb, beta, at(c, c0*ldc), ldc, sc, g.batch))
	}
}
