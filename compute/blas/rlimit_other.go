//go:build !unix

package blas

// rlimitAS is no limit where there is no RLIMIT_AS.
func rlimitAS() (uint64, bool) { return 0, false }
