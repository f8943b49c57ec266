package computetest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// refGemm is alpha*op(a)*op(b) + beta*c in float64; a is stored (ar,ac),
// b (br,bc), c (m,n).
func refGemm(tA, tB bool, m, n, k int, alpha float64, a []float32, ac int, b []float32, bc int, beta float64, c []float32) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				ai, bi := i*ac+l, l*bc+j
				if tA {
					ai = l*ac + i
				}
				if tB {
					bi = j*bc + l
				}
				s += float64(a[ai]) * float64(b[bi])
			}
			out[i*n+j] = alpha*s + beta*float64(c[i*n+j])
		}
	}
	return out
}

func testGemm(t *testing.T, e compute.Engine) {
	sizes := [][3]int{{1, 1, 1}, {1, 7, 5}, {5, 3, 1}, {13, 11, 9}, {70, 65, 67}, {33, 200, 129}}
	for _, sz := range sizes {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			m, n, k := sz[0], sz[1], sz[2]
			tA, tB := tr[0], tr[1]
			r := rng(uint64(m*10000 + n*100 + k))
			ar, ac := m, k
			if tA {
				ar, ac = k, m
			}
			br, bc := k, n
			if tB {
				br, bc = n, k
			}
			av, bv, cv := randVals(r, ar*ac), randVals(r, br*bc), randVals(r, m*n)
			for _, ab := range [][2]float32{{1, 0}, {0.5, -2}} {
				alpha, beta := ab[0], ab[1]
				a, b, c := tensorOf(e, av, ar, ac), tensorOf(e, bv, br, bc), tensorOf(e, cv, m, n)
				e.Gemm(tA, tB, alpha, a, b, beta, c)
				want := refGemm(tA, tB, m, n, k, float64(alpha), av, ac, bv, bc, float64(beta), cv)
				got := read(e, c)
				tol := 2e-6 * math.Sqrt(float64(k)+1) * 4
				for i := range got {
					if !near(got[i], want[i], tol) {
						t.Fatalf("Gemm(tA=%v, tB=%v, alpha=%v, beta=%v) %dx%dx%d: c[%d] = %v, want %v",
							tA, tB, alpha, beta, m, n, k, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// A rank-3 tensor is read as the matrix (first dimension, rest).
func testGemmRank3(t *testing.T, e compute.Engine) {
	r := rng(3)
	xv, wv := randVals(r, 4*2*3), randVals(r, 5*6)
	x := tensorOf(e, xv, 4, 2, 3) // (4,6) as a matrix
	w := tensorOf(e, wv, 5, 6)
	y := e.Alloc(4, 5)
	e.Gemm(false, true, 1, x, w, 0, y)
	want := refGemm(false, true, 4, 5, 6, 1, xv, 6, wv, 6, 0, make([]float32, 20))
	for i, g := range read(e, y) {
		if !near(g, want[i], 1e-5) {
			t.Fatalf("y[%d] = %v, want %v", i, g, want[i])
		}
	}
}

func testGemmPanics(t *testing.T, e compute.Engine) {
	a, b, c := e.Alloc(2, 3), e.Alloc(4, 5), e.Alloc(2, 5)
	expectPanic(t, "Gemm with mismatched K", func() { e.Gemm(false, false, 1, a, b, 0, c) }, "[2 3]", "[4 5]", "[2 5]")
	b2 := e.Alloc(3, 5)
	expectPanic(t, "Gemm with a wrong c", func() { e.Gemm(false, false, 1, a, b2, 0, e.Alloc(5, 2)) }, "[5 2]")
	expectPanic(t, "Gemm on a vector", func() { e.Gemm(false, false, 1, e.Alloc(3), b2, 0, c) }, "[3]")
	sq := e.Alloc(3, 3)
	expectPanic(t, "Gemm into its own input", func() { e.Gemm(false, false, 1, sq, e.Alloc(3, 3), 0, sq) }, "overlap")
}
