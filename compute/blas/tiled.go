package blas

import (
	"runtime"
	"sync"
	"sync/atomic"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Tile sizes of the gonum driver. gonum's Sgemm runs serially (no goroutines,
// no allocation) when its (m,n) spans fewer than 4 of its 64x64 blocks, so a
// tile is at most 64x192; 32 rows leave enough tiles to share among threads.
// k is cut into blocks of 512: long enough for gonum's dot-product kernel
// (used when b is transposed) to run near its best, while a tile's panels of
// a and b stay within L2. (On the mlp's shapes, 32x192x512 runs the forward
// GEMM 1.6 times as fast as gonum's own 64x64x64 blocks, the others as fast.)
const (
	tileM = 32
	tileN = 192
	tileK = 512
)

// tiler runs gonum's serial Sgemm kernels tile by tile on a fixed pool of
// workers. Tiles of c are independent and each is computed the same way
// whatever the thread count, so results are bitwise identical for any
// number of threads.
type tiler struct {
	mu      sync.Mutex // one sgemm at a time; guards job and the pool
	threads int
	work    chan struct{} // one token per helping worker per call
	wg      sync.WaitGroup
	next    atomic.Int64 // next tile to take
	job     tileJob
}

// tileJob is the current call's arguments.
type tileJob struct {
	aT, bT        bool
	m, n, k       int
	alpha, beta   float32
	a, b, c       []float32
	lda, ldb, ldc int
	tilesN, tiles int
}

func newTiler(threads int) *tiler {
	t := &tiler{}
	t.setThreads(threads)
	return t
}

// setThreads resizes the pool to n threads (the caller's included).
func (t *tiler) setThreads(n int) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n == t.threads {
		return
	}
	if t.work != nil {
		close(t.work) // the old workers exit
	}
	t.threads, t.work = n, nil
	if n > 1 {
		t.work = make(chan struct{})
		for i := 1; i < n; i++ {
			go t.worker(t.work)
		}
	}
}

func (t *tiler) threadCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.threads
}

func (t *tiler) worker(work chan struct{}) {
	for range work {
		t.runTiles()
		t.wg.Done()
	}
}

// sgemm is Sgemm for validated arguments with m, n, k > 0 and alpha != 0.
func (t *tiler) sgemm(aT, bT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tilesN := (n + tileN - 1) / tileN
	tiles := (m + tileM - 1) / tileM * tilesN
	t.job = tileJob{aT: aT, bT: bT, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc, tilesN: tilesN, tiles: tiles}
	t.next.Store(0)
	helpers := min(t.threads, tiles) - 1
	t.wg.Add(helpers)
	for i := 0; i < helpers; i++ {
		t.work <- struct{}{}
	}
	t.runTiles()
	t.wg.Wait()
	t.job.a, t.job.b, t.job.c = nil, nil, nil // do not keep the caller's memory alive
}

// runTiles computes tiles until none are left.
func (t *tiler) runTiles() {
	j := &t.job
	for {
		tile := int(t.next.Add(1) - 1)
		if tile >= j.tiles {
			return
		}
		i0, j0 := tile/j.tilesN*tileM, tile%j.tilesN*tileN
		t.runTile(i0, j0, min(tileM, j.m-i0), min(tileN, j.n-j0))
	}
}

// runTile computes c[i0:i0+mi, j0:j0+nj] one k block at a time.
func (t *tiler) runTile(i0, j0, mi, nj int) {
	j := &t.job
	tA, tB := gblas.NoTrans, gblas.NoTrans
	if j.aT {
		tA = gblas.Trans
	}
	if j.bT {
		tB = gblas.Trans
	}
	cSub := sub(j.c, j.ldc, i0, j0, mi, nj)
	beta := j.beta
	for k0 := 0; k0 < j.k; k0 += tileK {
		kl := min(tileK, j.k-k0)
		var aSub, bSub []float32
		if j.aT { // a is stored (k,m)
			aSub = sub(j.a, j.lda, k0, i0, kl, mi)
		} else {
			aSub = sub(j.a, j.lda, i0, k0, mi, kl)
		}
		if j.bT { // b is stored (n,k)
			bSub = sub(j.b, j.ldb, j0, k0, nj, kl)
		} else {
			bSub = sub(j.b, j.ldb, k0, j0, kl, nj)
		}
		gonum.Implementation{}.Sgemm(tA, tB, mi, nj, kl, j.alpha, aSub, j.lda, bSub, j.ldb, beta, cSub, j.ldc)
		beta = 1
	}
}

// sub is the (r,c) block at (i,j) of a row-major matrix with leading
// dimension ld, as the shortest slice that holds it.
func sub(a []float32, ld, i, j, r, c int) []float32 {
	return a[i*ld+j : (i+r-1)*ld+j+c]
}
