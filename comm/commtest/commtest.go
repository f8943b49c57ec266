// Package commtest is the conformance suite that every comm backend runs
// (shm, nvshmem, mpi), in the manner of gonum's blas/testblas: exported
// checks that take a *testing.T and an open comm.Comm.
//
// The checks run inside every PE of a job: each PE calls the same checks in
// the same order, because most of them are collectives. They use the
// comm.Comm interface only — buffers are filled and read with PutFloat32 and
// GetFloat32 to MyPE(), never through host slices — so they run unchanged
// against device buffers. A backend's test starts a job (for example with
// comm/launch/launchtest) and calls RunAll in every PE:
//
//	launchtest.Run(t, launchtest.Job{NPEs: 4, Backend: "shm"}, func(t *testing.T, c comm.Comm) {
//		commtest.RunAll(t, c, commtest.Options{Reopen: reopen})
//	})
//
// A failed check stops the suite on that PE (the remaining checks are
// collectives its peers would wait for in vain); the job's launcher then
// reports the failure and stops the other PEs.
package commtest

import (
	"testing"

	"github.com/symddp/symddp/comm"
)

// Options adjusts RunAll.
type Options struct {
	// Lengths are the buffer lengths the data checks use (default
	// DefaultLengths).
	Lengths []int
	// Reopen opens the backend again with the configuration c was opened
	// with; RunAll checks that it fails with comm.ErrAlreadyInitialised while
	// c is open. Nil skips that check.
	Reopen func() (comm.Comm, error)
}

// DefaultLengths are the buffer lengths of the data checks: empty, a single
// element, an odd length shorter than a cache line, and a large length that
// is not a multiple of anything.
var DefaultLengths = []int{0, 1, 7, 1<<20 + 3}

// RunAll runs every check on c in a fixed order, as subtests, and ends by
// closing c (the use-after-Close checks). It stops at the first failed
// check.
func RunAll(t *testing.T, c comm.Comm, opts Options) {
	lengths := opts.Lengths
	if lengths == nil {
		lengths = DefaultLengths
	}
	checks := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"Identity", func(t *testing.T) { Identity(t, c) }},
		{"Barrier", func(t *testing.T) { Barrier(t, c) }},
		{"PutGet", func(t *testing.T) { PutGet(t, c, lengths) }},
		{"PutGetBytes", func(t *testing.T) { PutGetBytes(t, c) }},
		{"PG", func(t *testing.T) { PG(t, c) }},
		{"SignalRing", func(t *testing.T) { SignalRing(t, c) }},
		{"FenceQuiet", func(t *testing.T) { FenceQuiet(t, c) }},
		{"AllReduce", func(t *testing.T) { AllReduce(t, c, lengths) }},
		{"IAllReduce", func(t *testing.T) { IAllReduce(t, c) }},
		{"Reduce", func(t *testing.T) { Reduce(t, c, lengths) }},
		{"Broadcast", func(t *testing.T) { Broadcast(t, c, lengths) }},
		{"Shard", func(t *testing.T) { Shard(t) }},
		{"ReduceScatter", func(t *testing.T) { ReduceScatter(t, c, lengths) }},
		{"IReduceScatter", func(t *testing.T) { IReduceScatter(t, c, lengths) }},
		{"AllGather", func(t *testing.T) { AllGather(t, c, lengths) }},
		{"AllocFree", func(t *testing.T) { AllocFree(t, c) }},
		{"Misuse", func(t *testing.T) { Misuse(t, c) }},
		{"SizeMismatch", func(t *testing.T) { SizeMismatch(t, c) }},
		{"SecondOpen", func(t *testing.T) { SecondOpen(t, c, opts.Reopen) }},
		{"UseAfterClose", func(t *testing.T) { UseAfterClose(t, c) }},
	}
	for _, ck := range checks {
		if !t.Run(ck.name, ck.run) {
			return
		}
	}
}

// Identity checks MyPE, NPEs and Backend.
func Identity(t *testing.T, c comm.Comm) {
	if c.NPEs() < 1 || c.MyPE() < 0 || c.MyPE() >= c.NPEs() {
		t.Fatalf("PE %d of %d: out of range", c.MyPE(), c.NPEs())
	}
	if c.Backend() == "" {
		t.Fatalf("Backend() is empty")
	}
}

// fixedOrder reports whether c declares the PE-order float32 sum.
func fixedOrder(c comm.Comm) bool {
	f, ok := c.(comm.FixedOrderer)
	return ok && f.FixedOrder()
}

// must fails the check at once on a runtime error: the PE cannot take part in
// the next collective.
func must(t *testing.T, c comm.Comm, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("PE %d: %s: %v", c.MyPE(), what, err)
	}
}

// alloc allocates a symmetric buffer or fails the check.
func alloc(t *testing.T, c comm.Comm, kind comm.Kind, n int) comm.Buffer {
	t.Helper()
	b, err := c.Alloc(kind, n)
	must(t, c, "alloc", err)
	if b.Kind() != kind || b.Len() != n {
		t.Fatalf("PE %d: Alloc(%s, %d) gave a %s buffer of %d", c.MyPE(), kind, n, b.Kind(), b.Len())
	}
	return b
}

// free frees b or fails the check.
func free(t *testing.T, c comm.Comm, b comm.Buffer) {
	t.Helper()
	must(t, c, "free", c.Free(b))
}

// fill writes vals into this PE's copy of b at off.
func fill(t *testing.T, c comm.Comm, b comm.Buffer, off int, vals []float32) {
	t.Helper()
	must(t, c, "put to self", c.PutFloat32(b, off, vals, c.MyPE()))
}

// read returns this PE's elements [off, off+n) of b.
func read(t *testing.T, c comm.Comm, b comm.Buffer, off, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	must(t, c, "get from self", c.GetFloat32(out, b, off, c.MyPE()))
	return out
}
