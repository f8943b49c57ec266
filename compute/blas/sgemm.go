package blas

import (
	"math"

	gblas "gonum.org/v1/gonum/blas"
)

// Sgemm computes c = alpha*op(a)*op(b) + beta*c for row-major matrices, where
// op(a) is (m,k), op(b) is (k,n) and c is (m,n), with leading dimensions
// lda, ldb and ldc. It panics, like gonum, on bad arguments or short slices
// (before any C code sees them), and never allocates.
func (b *BLAS) Sgemm(tA, tB gblas.Transpose, m, n, k int, alpha float32, a []float32, lda int, bm []float32, ldb int, beta float32, c []float32, ldc int) {
	aT, bT := checkSgemm(tA, tB, m, n, k, len(a), lda, len(bm), ldb, len(c), ldc)
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	if b.lib != nil {
		b.lib.sgemm(aT, bT, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc)
		return
	}
	b.tiles.sgemm(aT, bT, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc)
}

// checkSgemm validates Sgemm's arguments and reports whether a and b are
// transposed.
func checkSgemm(tA, tB gblas.Transpose, m, n, k, la, lda, lb, ldb, lc, ldc int) (aT, bT bool) {
	aT, bT = isTrans(tA), isTrans(tB)
	if m < 0 || n < 0 || k < 0 {
		panic("blas: Sgemm: negative dimension")
	}
	// Stored shapes: a is (k,m) when transposed, else (m,k); b likewise.
	ar, ac := m, k
	if aT {
		ar, ac = k, m
	}
	br, bc := k, n
	if bT {
		br, bc = n, k
	}
	if lda < max(1, ac) || ldb < max(1, bc) || ldc < max(1, n) {
		panic("blas: Sgemm: bad leading dimension")
	}
	if max(m, n, k, lda, ldb, ldc) > math.MaxInt32 {
		panic("blas: Sgemm: dimension beyond the C int range")
	}
	if m == 0 || n == 0 {
		return
	}
	if k > 0 && (la < (ar-1)*lda+ac || lb < (br-1)*ldb+bc) {
		panic("blas: Sgemm: a or b too short")
	}
	if lc < (m-1)*ldc+n {
		panic("blas: Sgemm: c too short")
	}
	return
}

func isTrans(t gblas.Transpose) bool {
	switch t {
	case gblas.NoTrans:
		return false
	case gblas.Trans, gblas.ConjTrans:
		return true
	}
	panic("blas: Sgemm: bad transpose")
}

// scaleC computes c = beta*c over an (m,n) matrix; beta == 0 writes zeros,
// whatever c held (NaN included), as BLAS does.
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
