package commtest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/symddp/symddp/comm"
)

// foreign is a Buffer that no backend made.
type foreign struct{}

func (foreign) Kind() comm.Kind { return comm.Float32 }
func (foreign) Len() int        { return 8 }

// wantErr fails unless err wraps target.
func wantErr(t *testing.T, c comm.Comm, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("PE %d: %s: got error %v, want one wrapping %q", c.MyPE(), what, err, target)
	}
}

// AllocFree checks that Alloc zeroes memory a freed buffer used, that every
// kind can be allocated, that freeing in another order than allocating works,
// and that a request larger than any heap fails with ErrHeapExhausted on
// every PE and leaves the runtime usable.
func AllocFree(t *testing.T, c comm.Comm) {
	const n = 1000
	a := alloc(t, c, comm.Float32, n)
	fill(t, c, a, 0, values(7, c.MyPE(), 0, n))
	must(t, c, "barrier", c.Barrier())
	free(t, c, a)
	b := alloc(t, c, comm.Float32, n)
	checkEqual(t, c, "a new buffer over freed memory", read(t, c, b, 0, n), make([]float32, n))
	others := []comm.Buffer{
		alloc(t, c, comm.Byte, 3),
		alloc(t, c, comm.Uint64, 5),
		alloc(t, c, comm.BFloat16, 9),
		alloc(t, c, comm.Float32, 0),
	}
	free(t, c, b)
	for i := len(others) - 1; i >= 0; i-- {
		free(t, c, others[i])
	}
	huge, err := c.Alloc(comm.Float32, 1<<50)
	wantErr(t, c, "alloc of 4 PiB", err, comm.ErrHeapExhausted)
	if huge != nil {
		t.Errorf("PE %d: failed alloc returned a buffer", c.MyPE())
	}
	free(t, c, alloc(t, c, comm.Float32, n))
}

// Misuse checks that bad offsets, lengths, PE numbers, kinds and buffers
// give the documented errors (test with errors.Is) without a collective.
func Misuse(t *testing.T, c comm.Comm) {
	npes, me := c.NPEs(), c.MyPE()
	const n = 8
	b := alloc(t, c, comm.Float32, n)
	defer free(t, c, b)
	bb := alloc(t, c, comm.Byte, n)
	defer free(t, c, bb)
	sig := alloc(t, c, comm.Uint64, 1)
	defer free(t, c, sig)
	two := make([]float32, 2)
	_, gErr := c.G(b, n, me)
	_, gNeg := c.G(b, -1, me)

	// Offsets and lengths past the buffer.
	wantErr(t, c, "put past the end", c.PutFloat32(b, n-1, two, me), comm.ErrBounds)
	wantErr(t, c, "put at a negative offset", c.PutFloat32(b, -1, two, me), comm.ErrBounds)
	wantErr(t, c, "get past the end", c.GetFloat32(two, b, n-1, me), comm.ErrBounds)
	wantErr(t, c, "get bytes past the end", c.GetBytes(make([]byte, 2), bb, n-1, me), comm.ErrBounds)
	wantErr(t, c, "put bytes past the end", c.PutBytes(bb, n, []byte{1}, me), comm.ErrBounds)
	wantErr(t, c, "p at Len", c.P(b, n, 1, me), comm.ErrBounds)
	wantErr(t, c, "g at Len", gErr, comm.ErrBounds)
	wantErr(t, c, "g at -1", gNeg, comm.ErrBounds)
	wantErr(t, c, "put signal past the end", c.PutSignal(b, n, two, sig, 0, 1, comm.SignalAdd, me), comm.ErrBounds)
	wantErr(t, c, "put signal to a signal past the end", c.PutSignal(b, 0, two, sig, 1, 1, comm.SignalAdd, me), comm.ErrBounds)
	wantErr(t, c, "wait on a signal past the end", c.WaitUntil(sig, 1, comm.CmpEQ, 0), comm.ErrBounds)
	wantErr(t, c, "allreduce past the end", c.AllReduce(b, 1, n, comm.Sum), comm.ErrBounds)
	wantErr(t, c, "allreduce of a negative length", c.AllReduce(b, 0, -1, comm.Sum), comm.ErrBounds)
	_, iErr := c.IAllReduce(b, n, 1, comm.Sum)
	wantErr(t, c, "iallreduce past the end", iErr, comm.ErrBounds)
	wantErr(t, c, "reduce past the end", c.Reduce(b, 0, n+1, comm.Sum, 0), comm.ErrBounds)
	if s, ok := c.(comm.Sharder); ok {
		for _, a := range [][4]int{{0, n + 1, 0, 1}, {1, 4, 0, 2}, {1, 4, 2, 6}, {0, n, 5, 4}} {
			_, err := s.IReduceScatter(b, a[0], a[1], a[2], a[3], comm.Sum)
			wantErr(t, c, fmt.Sprintf("ireducescatter of part [%d, %d) of range [%d, %d)", a[2], a[3], a[0], a[0]+a[1]), err, comm.ErrBounds)
		}
		_, err := s.IReduceScatter(bb, 0, n, 0, n, comm.Sum)
		wantErr(t, c, "ireducescatter of a byte buffer", err, comm.ErrKind)
	}
	wantErr(t, c, "broadcast past the end", c.Broadcast(b, n, 1, 0), comm.ErrBounds)

	// PE numbers out of range.
	for _, pe := range []int{-1, npes} {
		_, gPE := c.G(b, 0, pe)
		wantErr(t, c, "put to a PE out of range", c.PutFloat32(b, 0, two, pe), comm.ErrPERange)
		wantErr(t, c, "get from a PE out of range", c.GetFloat32(two, b, 0, pe), comm.ErrPERange)
		wantErr(t, c, "p to a PE out of range", c.P(b, 0, 1, pe), comm.ErrPERange)
		wantErr(t, c, "g from a PE out of range", gPE, comm.ErrPERange)
		wantErr(t, c, "put bytes to a PE out of range", c.PutBytes(bb, 0, []byte{1}, pe), comm.ErrPERange)
		wantErr(t, c, "put signal to a PE out of range", c.PutSignal(b, 0, two, sig, 0, 1, comm.SignalSet, pe), comm.ErrPERange)
		wantErr(t, c, "reduce to a root out of range", c.Reduce(b, 0, n, comm.Sum, pe), comm.ErrPERange)
		wantErr(t, c, "broadcast from a root out of range", c.Broadcast(b, 0, n, pe), comm.ErrPERange)
	}

	// Kinds an operation does not take.
	wantErr(t, c, "put float32 into a byte buffer", c.PutFloat32(bb, 0, two, me), comm.ErrKind)
	wantErr(t, c, "put bytes into a float32 buffer", c.PutBytes(b, 0, []byte{1}, me), comm.ErrKind)
	wantErr(t, c, "allreduce of a byte buffer", c.AllReduce(bb, 0, n, comm.Sum), comm.ErrKind)
	wantErr(t, c, "wait on a float32 buffer", c.WaitUntil(b, 0, comm.CmpEQ, 0), comm.ErrKind)
	wantErr(t, c, "put signal with a float32 signal", c.PutSignal(b, 0, two, b, 0, 1, comm.SignalSet, me), comm.ErrKind)

	// Buffers that are not live symmetric allocations of c.
	wantErr(t, c, "put into a foreign buffer", c.PutFloat32(foreign{}, 0, two, me), comm.ErrNotSymmetric)
	wantErr(t, c, "get from a foreign buffer", c.GetFloat32(two, foreign{}, 0, me), comm.ErrNotSymmetric)
	wantErr(t, c, "allreduce of a foreign buffer", c.AllReduce(foreign{}, 0, 1, comm.Sum), comm.ErrNotSymmetric)
	wantErr(t, c, "free of a foreign buffer", c.Free(foreign{}), comm.ErrNotSymmetric)
	wantErr(t, c, "free of nil", c.Free(nil), comm.ErrNotSymmetric)
	gone := alloc(t, c, comm.Float32, n)
	free(t, c, gone)
	wantErr(t, c, "second free", c.Free(gone), comm.ErrNotSymmetric)
	wantErr(t, c, "put into a freed buffer", c.PutFloat32(gone, 0, two, me), comm.ErrNotSymmetric)
	wantErr(t, c, "allreduce of a freed buffer", c.AllReduce(gone, 0, 1, comm.Sum), comm.ErrNotSymmetric)

	// After all that the runtime still works.
	must(t, c, "barrier after misuse", c.Barrier())
	if t.Failed() {
		t.FailNow()
	}
}

// SizeMismatch checks that PEs asking for different lengths or kinds all get
// ErrSizeMismatch, and that the runtime stays usable. It needs two PEs.
func SizeMismatch(t *testing.T, c comm.Comm) {
	if c.NPEs() < 2 {
		t.Skip("needs at least 2 PEs")
	}
	me := c.MyPE()
	b, err := c.Alloc(comm.Float32, 10+me)
	wantErr(t, c, "alloc of 10+MyPE() elements", err, comm.ErrSizeMismatch)
	if b != nil {
		t.Errorf("PE %d: a mismatched alloc returned a buffer", me)
	}
	kind := comm.Float32
	if me == c.NPEs()-1 {
		kind = comm.Byte
	}
	_, err = c.Alloc(kind, 10)
	wantErr(t, c, "alloc of another kind on the last PE", err, comm.ErrSizeMismatch)
	if t.Failed() {
		t.FailNow()
	}
	free(t, c, alloc(t, c, comm.Float32, 10))
}

// SecondOpen checks that opening the backend again while c is open fails
// with ErrAlreadyInitialised. reopen opens it with c's configuration; nil
// skips the check.
func SecondOpen(t *testing.T, c comm.Comm, reopen func() (comm.Comm, error)) {
	if reopen == nil {
		t.Skip("no Reopen in Options")
	}
	c2, err := reopen()
	wantErr(t, c, "second open", err, comm.ErrAlreadyInitialised)
	if c2 != nil {
		t.Errorf("PE %d: a failed second open returned a runtime", c.MyPE())
	}
}

// UseAfterClose closes c and checks that every later call fails with
// ErrClosed.
func UseAfterClose(t *testing.T, c comm.Comm) {
	me := c.MyPE()
	b := alloc(t, c, comm.Float32, 4)
	sig := alloc(t, c, comm.Uint64, 1)
	must(t, c, "close", c.Close())
	two := make([]float32, 2)
	_, aErr := c.Alloc(comm.Float32, 1)
	_, gErr := c.G(b, 0, me)
	_, iErr := c.IAllReduce(b, 0, 1, comm.Sum)
	var rsErr error = comm.ErrClosed // what a backend that is no Sharder would say
	if s, ok := c.(comm.Sharder); ok {
		_, rsErr = s.IReduceScatter(b, 0, 4, 0, 2, comm.Sum)
	}
	for _, k := range []struct {
		what string
		err  error
	}{
		{"alloc", aErr},
		{"free", c.Free(b)},
		{"put", c.PutFloat32(b, 0, two, me)},
		{"get", c.GetFloat32(two, b, 0, me)},
		{"put bytes", c.PutBytes(b, 0, []byte{1}, me)},
		{"get bytes", c.GetBytes([]byte{0}, b, 0, me)},
		{"p", c.P(b, 0, 1, me)},
		{"g", gErr},
		{"put signal", c.PutSignal(b, 0, two, sig, 0, 1, comm.SignalSet, me)},
		{"wait until", c.WaitUntil(sig, 0, comm.CmpEQ, 0)},
		{"fence", c.Fence()},
		{"quiet", c.Quiet()},
		{"barrier", c.Barrier()},
		{"allreduce", c.AllReduce(b, 0, 1, comm.Sum)},
		{"iallreduce", iErr},
		{"ireducescatter", rsErr},
		{"reduce", c.Reduce(b, 0, 1, comm.Sum, 0)},
		{"broadcast", c.Broadcast(b, 0, 1, 0)},
		{"close", c.Close()},
	} {
		wantErr(t, c, k.what+" after close", k.err, comm.ErrClosed)
	}
}
