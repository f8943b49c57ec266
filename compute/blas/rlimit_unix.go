//go:build unix

package blas

import "golang.org/x/sys/unix"

// rlimitAS is RLIMIT_AS's soft limit, and whether it is finite.
func rlimitAS() (uint64, bool) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &r); err != nil || r.Cur == unix.RLIM_INFINITY {
		return 0, false
	}
	return uint64(r.Cur), true
}
