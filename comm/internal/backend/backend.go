// Package backend holds the code that the comm backends (comm/shm,
// comm/nvshmem, comm/mpi) share: registering a backend's constructor with
// package comm, filling in a comm.Config's defaults and checking the
// arguments of their operations, with the same messages in every backend.
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

// CheckAccess returns the error of call's access, on PE me of backend name,
// to elements [off, off+n) of b on PE pe of npes, or nil when the range
// lies inside b and pe is a PE. The buffer's kind is the backend's to check.
func CheckAccess(name string, me int, call string, b comm.Buffer, off, n, pe, npes int) error {
	if err := comm.CheckRange(call, b, off, n); err != nil {
		return fmt.Errorf("%s: PE %d: %w", name, me, err)
	}
	if err := comm.CheckPE(call, pe, npes); err != nil {
		return fmt.Errorf("%s: PE %d: %w", name, me, err)
	}
	return nil
}

// CheckPart returns the error of call, on PE me of backend name, reducing
// the part [lo, hi) of elements [off, off+n) of b (Sharder.IReduceScatter),
// or nil when the range lies inside b and the part inside the range.
func CheckPart(name string, me int, call string, b comm.Buffer, off, n, lo, hi int) error {
	if err := comm.CheckPart(call, b, off, n, lo, hi); err != nil {
		return fmt.Errorf("%s: PE %d: %w", name, me, err)
	}
	return nil
}

// CheckOp returns the error of call, on PE me of backend name, reducing with
// op, or nil when op is a reduction operator.
func CheckOp(name string, me int, call string, op comm.Op) error {
	if op < comm.Sum || op > comm.Min {
		return fmt.Errorf("%s: PE %d: %s: unknown operator %s: %w", name, me, call, op, comm.ErrKind)
	}
	return nil
}

// CheckSignalOp returns the error of call, on PE me of backend name,
// updating a signal word with op, or nil when op is a signal operation.
func CheckSignalOp(name string, me int, call string, op comm.SignalOp) error {
	if op != comm.SignalSet && op != comm.SignalAdd {
		return fmt.Errorf("%s: PE %d: %s: unknown signal operation %d: %w", name, me, call, op, comm.ErrKind)
	}
	return nil
}

// CheckCmp returns the error of call, on PE me of backend name, waiting on
// comparison cmp, or nil when cmp is a comparison.
func CheckCmp(name string, me int, call string, cmp comm.Cmp) error {
	if cmp < comm.CmpEQ || cmp > comm.CmpLE {
		return fmt.Errorf("%s: PE %d: %s: unknown comparison %d: %w", name, me, call, cmp, comm.ErrKind)
	}
	return nil
}
