package cuda

import "github.com/symddp/symddp/compute"

// Gemm computes c = alpha*op(a)*op(b) + beta*c with cuBLAS SGEMM (fp32, no
// TF32) on the stream. op(a) is (M,K), op(b) is (K,N), c is (M,N); tensors
// of rank above 2 are read as (Shape[0], rest).
func (e *Engine) Gemm(transA, transB bool, alpha float32, a, b compute.Tensor, beta float32, c compute.Tensor) {
	ad, ar, ac := e.matrix("Gemm", a)
	bd, br, bc := e.matrix("Gemm", b)
	cd, cr, cc := e.matrix("Gemm", c)
	m, k := ar, ac
	if transA {
		m, k = ac, ar
	}
	kb, n := br, bc
	if transB {
		kb, n = bc, br
	}
	if k != kb || cr != m || cc != n {
		panicGemm(transA, transB, ad, bd, cd)
	}
	if overlap(cd, ad) || overlap(cd, bd) {
		panicShapes("Gemm", "c overlaps a or b", ad.shape, bd.shape, cd.shape)
	}
	e.fail("Gemm", e.dev.Gemm(transA, transB, m, n, k, alpha, ad.ptr, ac, bd.ptr, bc, beta, cd.ptr, cc))
}

//go:noinline
func panicGemm(transA, transB bool, a, b, c *Tensor) {
	what := "op(a) (M,K) times op(b) (K,N) into c (M,N) does not fit"
	if transA || transB {
		what += " with"
		if transA {
			what += " a transposed"
		}
		if transB {
			what += " b transposed"
		}
	}
	panicShapes("Gemm", what, a.shape, b.shape, c.shape)
}
