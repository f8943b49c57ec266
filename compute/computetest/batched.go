package computetest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunBatchedMatMul is the conformance suite of compute.BatchedMatMul; it
// skips when e has no BatchedMatMul.
func RunBatchedMatMul(t *testing.T, e compute.Engine) {
	bm := require[compute.BatchedMatMul](t, e, "batched matmul")
	t.Run("GemmBatched", func(t *testing.T) { testGemmBatched(t, e, bm) })
	t.Run("Panics", func(t *testing.T) {
		a, b, c := e.Alloc(2, 3, 4), e.Alloc(2, 4, 5), e.Alloc(2, 3, 5)
		expectPanic(t, "GemmBatched with another batch", func() { bm.GemmBatched(false, false, 1, a, e.Alloc(3, 4, 5), 0, c) }, "GemmBatched")
		expectPanic(t, "GemmBatched of matrices", func() { bm.GemmBatched(false, false, 1, e.Alloc(3, 4), b, 0, c) }, "GemmBatched")
		expectPanic(t, "GemmBatched that does not fit", func() { bm.GemmBatched(false, true, 1, a, b, 0, c) }, "GemmBatched")
	})
	t.Run("NoAllocs", func(t *testing.T) {
		a, b, c := e.Alloc(4, 30, 20), e.Alloc(4, 20, 10), e.Alloc(4, 30, 10)
		noAllocs(t, map[string]func(){"GemmBatched": func() { bm.GemmBatched(false, false, 1, a, b, 0, c) }})
	})
}

func testGemmBatched(t *testing.T, e compute.Engine, bm compute.BatchedMatMul) {
	const batch = 3
	for _, sz := range [][3]int{{1, 1, 1}, {5, 7, 3}, {33, 17, 65}} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			m, n, k := sz[0], sz[1], sz[2]
			tA, tB := tr[0], tr[1]
			ar, ac := m, k
			if tA {
				ar, ac = k, m
			}
			br, bc := k, n
			if tB {
				br, bc = n, k
			}
			r := rng(uint64(m*10000 + n*100 + k))
			av, bv, cv := randVals(r, batch*ar*ac), randVals(r, batch*br*bc), randVals(r, batch*m*n)
			for _, ab := range [][2]float32{{1, 0}, {0.5, -2}} {
				start := cv
				if ab[1] == 0 {
					start = nanVals(len(cv)) // beta 0 overwrites
				}
				a, b, c := tensorOf(e, av, batch, ar, ac), tensorOf(e, bv, batch, br, bc), tensorOf(e, start, batch, m, n)
				bm.GemmBatched(tA, tB, ab[0], a, b, ab[1], c)
				got := read(e, c)
				for i := 0; i < batch; i++ {
					want := refGemm(tA, tB, m, n, k, float64(ab[0]), av[i*ar*ac:], ac, bv[i*br*bc:], bc,
						float64(ab[1]), cv[i*m*n:(i+1)*m*n])
					if ab[1] == 0 {
						want = refGemm(tA, tB, m, n, k, float64(ab[0]), av[i*ar*ac:], ac, bv[i*br*bc:], bc,
							0, make([]float32, m*n))
					}
					tol := 8e-6 * math.Sqrt(float64(k)+1)
					for j, w := range want {
						if !near(got[i*m*n+j], w, tol) {
							t.Fatalf("GemmBatched(tA=%v, tB=%v, alpha=%v, beta=%v) %dx%dx%d: c[%d][%d] = %v, want %v",
								tA, tB, ab[0], ab[1], m, n, k, i, j, got[i*m*n+j], w)
						}
					}
				}
			}
		}
	}
}
