//go:build !cgo

package blas

import "errors"

// library stands in for a loaded OpenBLAS in builds without cgo, where
// loadOpenBLAS always fails and no method is ever called.
type library struct{ path string }

func loadOpenBLAS() (*library, error) {
	return nil, errors.New("built without cgo (CGO_ENABLED=0)")
}

func (l *library) sgemm(aT, bT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	panic("blas: OpenBLAS is not available without cgo")
}

func (l *library) setThreads(n int) {}

func (l *library) threads() int { return 1 }

func (l *library) config() string { return "OpenBLAS" }
