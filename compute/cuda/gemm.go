package cuda

import "github.com/symddp/symddp/compute"

// Gemm computes c = alpha*op(a)*op(b) + beta*c with cuBLAS SGEMM (fp32, no
// TF32) on the stream. op(a) is (M,K), op(b) is (K,N), c is (M,N); tensors
// of rank above 2 are read as (Shape[0], rest).
func (e *Engine) Gemm(transA, transB bool, alpha float32, a, b compute.Tensor, beta float32, c compute.Tensor) {
	ad, ar, ac := e.matrix("Gemm", a)
	bd, br, bc := e.matrix("Gemm", b)
	cd, cr, cc := e.matrix("Gemm", c)
	m, n, k, ok := compute.GemmDims(transA, transB, ar, ac, br, bc, cr, cc)
	if !ok {
		panicGemm(transA, transB, ad, bd, cd)
	}
	if overlap(cd, ad) || overlap(cd, bd) {
		compute.PanicShapes("cuda", "Gemm", "c overlaps a or b", ad.shape, bd.shape, cd.shape)
	}
	e.fail("Gemm", e.dev.Gemm(transA, transB, m, n, k, alpha, ad.ptr, ac, bd.ptr, bc, beta, cd.ptr, cc))
}

//go:noinline
func panicGemm(transA, transB bool, a, b, c *Tensor) {
	compute.PanicShapes("cuda", "Gemm", compute.GemmMismatch(transA, transB), a.shape, b.shape, c.shape)
}
