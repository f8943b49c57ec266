// Package backend holds the set-up code that the comm backends (comm/shm,
// comm/nvshmem, comm/mpi) share: registering a backend's constructor with
// package comm and filling in a comm.Config's defaults, with the same
// messages in every backend.
package backend

import (
	"fmt"

	"github.com/symddp/symddp/comm"
)

// Register makes newComm, a backend's New, available to comm.Open under
// name. A failed newComm gives a nil comm.Comm, not one holding a nil C.
func Register[C comm.Comm](name string, newComm func(comm.Config) (C, error)) {
	comm.Register(name, func(cfg comm.Config) (comm.Comm, error) {
		c, err := newComm(cfg)
		if err != nil {
			return nil, err
		}
		return c, nil
	})
}

// Defaults returns cfg with a zero HeapSize set to heapSize and a Timeout
// that is not positive set to comm.DefaultTimeout. A negative HeapSize is an
// error; name (the backend's) starts its message.
func Defaults(name string, cfg comm.Config, heapSize int64) (comm.Config, error) {
	if cfg.HeapSize < 0 {
		return cfg, fmt.Errorf("%s: heap size %d: want a positive number of bytes", name, cfg.HeapSize)
	}
	if cfg.HeapSize == 0 {
		cfg.HeapSize = heapSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = comm.DefaultTimeout
	}
	return cfg, nil
}

// CheckAlloc returns the error of an Alloc of n elements of kind on PE me of
// backend name, or nil when kind and n are valid.
func CheckAlloc(name string, me int, kind comm.Kind, n int) error {
	if kind.Size() == 0 {
		return fmt.Errorf("%s: PE %d: alloc: unknown kind %s: %w", name, me, kind, comm.ErrKind)
	}
	if n < 0 {
		return fmt.Errorf("%s: PE %d: alloc: negative length %d: %w", name, me, n, comm.ErrBounds)
	}
	return nil
}
