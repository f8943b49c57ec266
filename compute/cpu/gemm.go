package cpu

import (
	"unsafe"

	"github.com/symddp/symddp/compute"
	gblas "gonum.org/v1/gonum/blas"
)

// Gemm computes c = alpha*op(a)*op(b) + beta*c on the BLAS, in place over
// the tensors' memory. op(a) is (M,K), op(b) is (K,N), c is (M,N).
func (e *Engine) Gemm(transA, transB bool, alpha float32, a, b compute.Tensor, beta float32, c compute.Tensor) {
	ad, ar, ac := matrix("Gemm", a)
	bd, br, bc := matrix("Gemm", b)
	cd, cr, cc := matrix("Gemm", c)
	m, n, k, ok := compute.GemmDims(transA, transB, ar, ac, br, bc, cr, cc)
	if !ok {
		panicGemm(transA, transB, a, b, c)
	}
	tA, tB := gblas.NoTrans, gblas.NoTrans
	if transA {
		tA = gblas.Trans
	}
	if transB {
		tB = gblas.Trans
	}
	if overlap(cd, ad) || overlap(cd, bd) {
		compute.PanicShapes("cpu", "Gemm", "c overlaps a or b", a.Shape(), b.Shape(), c.Shape())
	}
	e.blas.Sgemm(tA, tB, m, n, k, alpha, ad, ac, bd, bc, beta, cd, cc)
}

//go:noinline
func panicGemm(transA, transB bool, a, b, c compute.Tensor) {
	compute.PanicShapes("cpu", "Gemm", compute.GemmMismatch(transA, transB), a.Shape(), b.Shape(), c.Shape())
}

// overlap reports whether two non-empty slices share memory.
func overlap(x, y []float32) bool {
	x0 := uintptr(unsafe.Pointer(unsafe.SliceData(x)))
	y0 := uintptr(unsafe.Pointer(unsafe.SliceData(y)))
	const w = unsafe.Sizeof(float32(0))
	return x0 < y0+uintptr(len(y))*w && y0 < x0+uintptr(len(x))*w
}
