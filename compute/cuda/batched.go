package cuda

import "github.com/symddp/symddp/compute"

var _ compute.BatchedMatMul = (*Engine)(nil)

// GemmBatched computes c[i] = alpha·op(a[i])·op(b[i]) + beta·c[i] for every
// i of the leading dimension of the rank-3 tensors a, b and c in one
// cuBLAS strided-batched SGEMM (sdc_gemm_batched: fp32, no TF32); op(a[i])
// is (M,K), op(b[i]) (K,N), c[i] (M,N). c may not overlap a or b.
func (e *Engine) GemmBatched(transA, transB bool, alpha float32, a, b compute.Tensor, beta float32, c compute.Tensor) {
	const op = "GemmBatched"
	ad, bd, cd := e.tensorOf(op, a), e.tensorOf(op, b), e.tensorOf(op, c)
	as, bs, cs := ad.shape, bd.shape, cd.shape
	m, n, k, batch := compute.GemmBatchedDims("cuda", transA, transB, as, bs, cs)
	if overlap(cd, ad) || overlap(cd, bd) {
		compute.PanicShapes("cuda", op, "c overlaps a or b", as, bs, cs)
	}
	e.fail(op, e.dev.GemmBatched(transA, transB, m, n, k, alpha, ad.ptr, as[2], as[1]*as[2], bd.ptr, bs[2], bs[1]*bs[2],
		beta, cd.ptr, cs[2], cs[1]*cs[2], batch))
}
