package cpu

import (
	"github.com/symddp/symddp/compute"
	gblas "gonum.org/v1/gonum/blas"
)

var _ compute.BatchedMatMul = (*Engine)(nil)

// GemmBatched computes c[i] = alpha·op(a[i])·op(b[i]) + beta·c[i] for every
// i of the leading dimension of the rank-3 tensors a, b and c, one BLAS
// Sgemm per matrix; op(a[i]) is (M,K), op(b[i]) (K,N), c[i] (M,N). c may
// not overlap a or b.
func (e *Engine) GemmBatched(transA, transB bool, alpha float32, a, b compute.Tensor, beta float32, c compute.Tensor) {
	const op = "GemmBatched"
	ad, bd, cd := data(op, a), data(op, b), data(op, c)
	as, bs, cs := a.Shape(), b.Shape(), c.Shape()
	m, n, k, batch := compute.GemmBatchedDims("cpu", transA, transB, as, bs, cs)
	if overlap(cd, ad) || overlap(cd, bd) {
		compute.PanicShapes("cpu", op, "c overlaps a or b", as, bs, cs)
	}
	tA, tB := gblas.NoTrans, gblas.NoTrans
	if transA {
		tA = gblas.Trans
	}
	if transB {
		tB = gblas.Trans
	}
	na, nb, nc := as[1]*as[2], bs[1]*bs[2], cs[1]*cs[2]
	for i := 0; i < batch; i++ {
		e.blas.Sgemm(tA, tB, m, n, k, alpha, ad[i*na:i*na+na], as[2], bd[i*nb:i*nb+nb], bs[2],
			beta, cd[i*nc:i*nc+nc], cs[2])
	}
}
