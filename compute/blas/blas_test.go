package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	gblas "gonum.org/v1/gonum/blas"
	"gorgonia.org/tensor"
)

// Both kinds of BLAS satisfy gorgonia's interface.
var _ tensor.BLAS = (*BLAS)(nil)

// kinds returns the BLAS kinds available in this build, by name.
func kinds(t testing.TB) map[string]*BLAS {
	out := map[string]*BLAS{"gonum": loadGonum()}
	if b, err := Load(OpenBLAS); err == nil {
		out["openblas"] = b
	} else {
		t.Logf("OpenBLAS not tested: %v", err)
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.Float64()*2 - 1)
	}
	return s
}

// naiveGemm is the definition of Sgemm, accumulated in float64.
func naiveGemm(aT, bT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for l := 0; l < k; l++ {
				ai, bi := i*lda+l, l*ldb+j
				if aT {
					ai = l*lda + i
				}
				if bT {
					bi = j*ldb + l
				}
				av, bv := a[ai], b[bi]
				s += float64(av) * float64(bv)
			}
			out[i*n+j] = float64(alpha)*s + float64(beta)*float64(c[i*ldc+j])
		}
	}
	return out
}

func TestSgemmMatchesReference(t *testing.T) {
	sizes := [][3]int{{1, 1, 1}, {3, 5, 7}, {65, 193, 67}, {130, 70, 129}, {17, 400, 3}, {7, 2, 300}, {9, 200, 1100}}
	for name, b := range kinds(t) {
		for _, sz := range sizes {
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				m, n, k := sz[0], sz[1], sz[2]
				aT, bT := tr[0], tr[1]
				t.Run(fmt.Sprintf("%s/%dx%dx%d/tA=%v,tB=%v", name, m, n, k, aT, bT), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(m*n*k), 7))
					// Leading dimensions wider than the matrices, to test strides.
					ar, ac := m, k
					if aT {
						ar, ac = k, m
					}
					br, bc := k, n
					if bT {
						br, bc = n, k
					}
					lda, ldb, ldc := ac+3, bc+1, n+2
					a, bm, c := randSlice(r, ar*lda), randSlice(r, br*ldb), randSlice(r, m*ldc)
					want := naiveGemm(aT, bT, m, n, k, 0.5, a, lda, bm, ldb, -1.5, c, ldc)
					tA, tB := gblas.NoTrans, gblas.NoTrans
					if aT {
						tA = gblas.Trans
					}
					if bT {
						tB = gblas.Trans
					}
					pad := append([]float32(nil), c...)
					b.Sgemm(tA, tB, m, n, k, 0.5, a, lda, bm, ldb, -1.5, c, ldc)
					tol := 1e-5 * math.Sqrt(float64(k)) * 4
					for i := 0; i < m; i++ {
						for j := 0; j < ldc; j++ {
							got := c[i*ldc+j]
							if j >= n { // outside the matrix: untouched
								if got != pad[i*ldc+j] {
									t.Fatalf("c[%d,%d] (padding) changed to %v", i, j, got)
								}
								continue
							}
							if w := want[i*n+j]; math.Abs(float64(got)-w) > tol*(1+math.Abs(w)) {
								t.Fatalf("c[%d,%d] = %v, want %v", i, j, got, w)
							}
						}
					}
				})
			}
		}
	}
}

func TestSgemmBetaZeroOverwritesNaN(t *testing.T) {
	for name, b := range kinds(t) {
		for _, k := range []int{0, 3} {
			a := []float32{1, 2, 3, 4, 5, 6}
			c := []float32{float32(math.NaN()), float32(math.NaN()), float32(math.NaN()), float32(math.NaN())}
			b.Sgemm(gblas.NoTrans, gblas.Trans, 2, 2, k, 1, a, max(k, 1), a, max(k, 1), 0, c, 2)
			want := []float32{14, 32, 32, 77}
			if k == 0 {
				want = []float32{0, 0, 0, 0}
			}
			for i := range c {
				if c[i] != want[i] {
					t.Errorf("%s k=%d: c = %v, want %v", name, k, c, want)
					break
				}
			}
		}
	}
}

func TestOpenBLASAndGonumAgree(t *testing.T) {
	ks := kinds(t)
	ob, ok := ks["openblas"]
	if !ok {
		t.Skip("OpenBLAS not loadable here")
	}
	r := rand.New(rand.NewPCG(1, 2))
	m, n, k := 256, 256, 784
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	c1, c2 := make([]float32, m*n), make([]float32, m*n)
	ob.Sgemm(gblas.NoTrans, gblas.Trans, m, n, k, 1, a, k, b, k, 0, c1, n)
	ks["gonum"].Sgemm(gblas.NoTrans, gblas.Trans, m, n, k, 1, a, k, b, k, 0, c2, n)
	for i := range c1 {
		if d := math.Abs(float64(c1[i] - c2[i])); d > 1e-4*(1+math.Abs(float64(c1[i]))) {
			t.Fatalf("element %d: openblas %v, gonum %v", i, c1[i], c2[i])
		}
	}
}

// The gonum driver gives the same bits whatever its thread count.
func TestGonumThreadsBitwiseEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m, n, k := 200, 300, 600
	a, b := randSlice(r, m*k), randSlice(r, k*n)
	run := func(threads int) []float32 {
		tl := newTiler(threads)
		defer tl.setThreads(1) // stop the helpers
		c := make([]float32, m*n)
		tl.sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n)
		return c
	}
	one, three := run(1), run(3)
	for i := range one {
		if math.Float32bits(one[i]) != math.Float32bits(three[i]) {
			t.Fatalf("element %d: 1 thread %v, 3 threads %v", i, one[i], three[i])
		}
	}
}

func TestSgemmDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	m, n, k := 256, 256, 256
	a, b, c := randSlice(r, m*k), randSlice(r, k*n), make([]float32, m*n)
	tl := newTiler(2)
	defer tl.setThreads(1)
	for name, bl := range kinds(t) {
		if bl.kind == Gonum {
			bl = &BLAS{kind: Gonum, tiles: tl}
		}
		allocs := testing.AllocsPerRun(3, func() {
			bl.Sgemm(gblas.NoTrans, gblas.NoTrans, m, n, k, 1, a, k, b, n, 0, c, n)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Sgemm, want 0", name, allocs)
		}
	}
}

func TestSgemmPanicsOnShortSlices(t *testing.T) {
	for name, b := range kinds(t) {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Sgemm with a short c did not panic", name)
				}
			}()
			a := make([]float32, 4)
			b.Sgemm(gblas.NoTrans, gblas.NoTrans, 2, 2, 2, 1, a, 2, a, 2, 0, make([]float32, 3), 2)
		}()
	}
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]Kind{"": Auto, "auto": Auto, "OpenBLAS": OpenBLAS, " gonum ": Gonum} {
		if got, err := ParseKind(in); err != nil || got != want {
			t.Errorf("ParseKind(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseKind("mkl"); err == nil {
		t.Error(`ParseKind("mkl") succeeded`)
	}
	t.Setenv(EnvVar, "nope")
	if _, err := FromEnv(); err == nil {
		t.Errorf("FromEnv with %s=nope succeeded", EnvVar)
	}
	t.Setenv(EnvVar, "gonum")
	if k, err := FromEnv(); err != nil || k != Gonum {
		t.Errorf("FromEnv = %q, %v; want gonum", k, err)
	}
}

func TestLoadAutoPrefersOpenBLAS(t *testing.T) {
	b, err := Load(Auto)
	if err != nil {
		t.Fatal(err)
	}
	_, openErr := Load(OpenBLAS)
	if want := map[bool]Kind{true: OpenBLAS, false: Gonum}[openErr == nil]; b.Kind() != want {
		t.Errorf("Load(Auto).Kind() = %q, want %q (OpenBLAS error: %v)", b.Kind(), want, openErr)
	}
	desc := b.String()
	if openErr == nil && (!strings.HasPrefix(desc, "OpenBLAS ") || !strings.Contains(desc, "libopenblas")) {
		t.Errorf("Load(Auto).String() = %q, want OpenBLAS's version and library", desc)
	}
	if openErr != nil && (!strings.HasPrefix(desc, "gonum pure-Go BLAS") || !strings.Contains(desc, "OpenBLAS not loaded: ")) {
		t.Errorf("Load(Auto).String() = %q, want gonum and why OpenBLAS is not loaded", desc)
	}
	t.Logf("auto: %s", desc)
}

// Under an address-space limit (ulimit -v) Auto takes the Go GEMM and says
// why: OpenBLAS 0.3.21 retried the mmap of its buffers without end there,
// and a run hung at full CPU without a word. OpenBLAS asked for by name is
// still loaded.
func TestAutoUnderAnAddressSpaceLimit(t *testing.T) {
	saved := addressSpaceLimit
	t.Cleanup(func() { addressSpaceLimit = saved })
	addressSpaceLimit = func() (uint64, bool) { return 2000 << 20, true }
	b, err := Load(Auto)
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind() != Gonum || !strings.Contains(b.String(), "the address space is limited to 2000 MiB (ulimit -v), under which OpenBLAS spins when it cannot map its buffers; SYMDDP_BLAS=openblas to use it anyway") {
		t.Errorf("Auto under a limit: %s, %s", b.Kind(), b)
	}
	if o, err := Load(OpenBLAS); err == nil && o.Kind() != OpenBLAS {
		t.Errorf("OpenBLAS by name under a limit: %s", o.Kind())
	}
}
