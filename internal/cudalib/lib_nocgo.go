//go:build !cgo

package cudalib

import (
	"fmt"
	"time"
)

// Lib stands in for the loaded library in builds without cgo, where Load
// always fails and no method is ever called on a Lib.
type Lib struct{}

// SymBuf stands in for a symmetric allocation in builds without cgo.
type SymBuf struct{}

// errNoCgo is what every entry point returns without cgo.
var errNoCgo = fmt.Errorf("%w: this program was built without cgo (CGO_ENABLED=0)", ErrUnavailable)

// Load always fails without cgo: the library can only be reached through cgo.
func Load(explicit string) (*Lib, error) { return nil, errNoCgo }

// Ptr is 0 without cgo.
func (b *SymBuf) Ptr() uintptr { return 0 }

// Bytes is 0 without cgo.
func (b *SymBuf) Bytes() int { return 0 }

// Path is empty without cgo.
func (l *Lib) Path() string { return "" }

// ABIVersion is 0 without cgo.
func (l *Lib) ABIVersion() int { return 0 }

// DeviceCount fails: the library needs cgo.
func (l *Lib) DeviceCount() (int, error) { return 0, errNoCgo }

// UniqueID fails: the library needs cgo.
func (l *Lib) UniqueID() ([]byte, error) { return nil, errNoCgo }

// Init fails: the library needs cgo.
func (l *Lib) Init(a InitArgs) (Info, error) { return Info{}, errNoCgo }

// Finalize fails: the library needs cgo.
func (l *Lib) Finalize(collective bool) error { return errNoCgo }

// Stream fails: the library needs cgo.
func (l *Lib) Stream() (uintptr, error) { return 0, errNoCgo }

// SetTimeout fails: the library needs cgo.
func (l *Lib) SetTimeout(d time.Duration) error { return errNoCgo }

// SetOneShotMax fails: the library needs cgo.
func (l *Lib) SetOneShotMax(bytes int) error { return errNoCgo }

// Alloc fails: the library needs cgo.
func (l *Lib) Alloc(bytes int) (*SymBuf, error) { return nil, errNoCgo }

// Free fails: the library needs cgo.
func (l *Lib) Free(b *SymBuf) error { return errNoCgo }

// PeerPtr fails: the library needs cgo.
func (l *Lib) PeerPtr(b *SymBuf, pe int) (uintptr, error) { return 0, errNoCgo }

// Put fails: the library needs cgo.
func (l *Lib) Put(b *SymBuf, off int, src []byte, pe int) error { return errNoCgo }

// Get fails: the library needs cgo.
func (l *Lib) Get(dst []byte, b *SymBuf, off int, pe int) error { return errNoCgo }

// PutSignal fails: the library needs cgo.
func (l *Lib) PutSignal(b *SymBuf, off int, src []byte, sig *SymBuf, sigOff int, value uint64, op SignalOp, pe int) error {
	return errNoCgo
}

// ReadU64 fails: the library needs cgo.
func (l *Lib) ReadU64(b *SymBuf, off int) (uint64, error) { return 0, errNoCgo }

// Quiet fails: the library needs cgo.
func (l *Lib) Quiet() error { return errNoCgo }

// BarrierEnqueue fails: the library needs cgo.
func (l *Lib) BarrierEnqueue() error { return errNoCgo }

// AllReduceEnqueue fails: the library needs cgo.
func (l *Lib) AllReduceEnqueue(b *SymBuf, off, n int, dt DType, op Op, algo Algo) error {
	return errNoCgo
}

// ReduceEnqueue fails: the library needs cgo.
func (l *Lib) ReduceEnqueue(b *SymBuf, off, n int, dt DType, op Op, root int) error { return errNoCgo }

// BroadcastEnqueue fails: the library needs cgo.
func (l *Lib) BroadcastEnqueue(b *SymBuf, off, n int, root int) error { return errNoCgo }

// AllGatherU64 fails: the library needs cgo.
func (l *Lib) AllGatherU64(mine []uint64, npes int) ([]uint64, error) { return nil, errNoCgo }

// AllGatherU64Enqueue fails: the library needs cgo.
func (l *Lib) AllGatherU64Enqueue(mine []uint64) error { return errNoCgo }

// AllGatherU64Result fails: the library needs cgo.
func (l *Lib) AllGatherU64Result(all []uint64, count int) error { return errNoCgo }

// StreamWait fails: the library needs cgo.
func (l *Lib) StreamWait(timeout time.Duration) error { return errNoCgo }

// StreamQuery fails: the library needs cgo.
func (l *Lib) StreamQuery() (bool, error) { return false, errNoCgo }

// EventRecord fails: the library needs cgo.
func (l *Lib) EventRecord() (Event, error) { return 0, errNoCgo }

// EventQuery fails: the library needs cgo.
func (l *Lib) EventQuery(ev Event) (bool, error) { return false, errNoCgo }

// EventWait fails: the library needs cgo.
func (l *Lib) EventWait(ev Event, timeout time.Duration) error { return errNoCgo }

// EventDestroy fails: the library needs cgo.
func (l *Lib) EventDestroy(ev Event) error { return errNoCgo }

// TimeoutInfo fails: the library needs cgo.
func (l *Lib) TimeoutInfo(npes int) ([]int, string, error) { return nil, "", errNoCgo }

// Abandon fails: the library needs cgo.
func (l *Lib) Abandon() error { return errNoCgo }

// DevAlloc fails: the library needs cgo.
func (l *Lib) DevAlloc(bytes int) (uintptr, error) { return 0, errNoCgo }

// DevFree fails: the library needs cgo.
func (l *Lib) DevFree(p uintptr) error { return errNoCgo }

// CopyHtoD fails: the library needs cgo.
func (l *Lib) CopyHtoD(dst uintptr, src []byte) error { return errNoCgo }

// CopyDtoH fails: the library needs cgo.
func (l *Lib) CopyDtoH(dst []byte, src uintptr) error { return errNoCgo }

// CopyDtoD fails: the library needs cgo.
func (l *Lib) CopyDtoD(dst, src uintptr, bytes int) error { return errNoCgo }

// Memset fails: the library needs cgo.
func (l *Lib) Memset(dst uintptr, v byte, bytes int) error { return errNoCgo }

// TimeAllReduce fails: the library needs cgo.
func (l *Lib) TimeAllReduce(b *SymBuf, n int, dt DType, op Op, algo Algo, warmup, iters int) (time.Duration, error) {
	return 0, errNoCgo
}

// TimeBarrier fails: the library needs cgo.
func (l *Lib) TimeBarrier(warmup, iters int) (time.Duration, error) { return 0, errNoCgo }

// TimeCopy fails: the library needs cgo.
func (l *Lib) TimeCopy(bytes, warmup, iters int) (time.Duration, error) { return 0, errNoCgo }

// Buildable reports whether this build can load the library at all: false
// without cgo.
func Buildable() bool { return false }
