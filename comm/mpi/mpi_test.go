//go:build mpi

package mpi_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/mpi"
)

// TestSpecifics checks, in a job of 3 ranks, what is particular to the mpi
// backend: host slices alias the window, Max and Min follow Go's max and
// min (NaN wins, -0 < +0), a mismatched Free is refused on every PE, a
// freed buffer's slices are nil, WaitUntil gives up with a TimeoutError, and
// the Go runtime still turns a nil dereference into a panic (MPI_Init must
// not keep its own SIGSEGV handler).
func TestSpecifics(t *testing.T) {
	env := []string{comm.EnvTimeout + "=3s"}
	out, err := runJob(t, 3, []string{"-x", comm.EnvTimeout}, env, func(t *testing.T, c comm.Comm) {
		me, npes := c.MyPE(), c.NPEs()
		if lib := c.(*mpi.Comm).Library(); !strings.Contains(lib, "MPI") {
			t.Errorf("Library() = %q", lib)
		}
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmtAny(r), "nil pointer") {
					t.Errorf("nil dereference recovered %v, want a runtime error", r)
				}
			}()
			var p *int
			_ = *p
		}()

		b, err := c.Alloc(comm.Float32, 64)
		if err != nil {
			t.Fatal(err)
		}
		hb := b.(comm.HostBuffer)
		hb.Float32s()[me] = float32(me + 1) // a plain store into the window
		if err := c.Barrier(); err != nil {
			t.Fatal(err)
		}
		for pe := 0; pe < npes; pe++ {
			if v, err := c.G(b, pe, pe); err != nil || v != float32(pe+1) {
				t.Fatalf("G of PE %d's slot %d = %v, %v; want %d", pe, pe, v, err, pe+1)
			}
		}
		if err := c.Barrier(); err != nil { // every PE has read before the copies change
			t.Fatal(err)
		}
		if hb.Uint64s() != nil || len(hb.Bytes()) != 256 {
			t.Fatalf("a float32 buffer: Uint64s %v, %d bytes; want nil and 256", hb.Uint64s(), len(hb.Bytes()))
		}

		// Element 0: -0 on PE 0, +0 elsewhere. Element 1: NaN on PE 1.
		// Element 2: PE numbers.
		negZero := float32(math.Copysign(0, -1))
		mine := []float32{0, float32(me), float32(me)}
		if me == 0 {
			mine[0] = negZero
		}
		if me == 1 {
			mine[1] = float32(math.NaN())
		}
		for _, tc := range []struct {
			op   comm.Op
			want []uint32
		}{
			{comm.Max, []uint32{0, 0x7fc00000, math.Float32bits(float32(npes - 1))}},
			{comm.Min, []uint32{0x80000000, 0x7fc00000, 0}},
		} {
			hs := hb.Float32s()
			copy(hs, mine)
			if err := c.AllReduce(b, 0, 3, tc.op); err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				got := math.Float32bits(hs[i])
				if got != w && !(math.IsNaN(float64(hs[i])) && w == 0x7fc00000) {
					t.Errorf("%s element %d: bits %#08x, want %#08x", tc.op, i, got, w)
				}
			}
		}

		other, err := c.Alloc(comm.Float32, 64)
		if err != nil {
			t.Fatal(err)
		}
		victim := b
		if me == 1 {
			victim = other
		}
		if err := c.Free(victim); !errors.Is(err, comm.ErrSizeMismatch) {
			t.Fatalf("PE 1 frees another buffer than the others: %v, want ErrSizeMismatch", err)
		}

		sig, err := c.Alloc(comm.Uint64, 1)
		if err != nil {
			t.Fatal(err)
		}
		// Every PE waits (so that none waits in the next collective for
		// one that waits here).
		err = c.WaitUntil(sig, 0, comm.CmpEQ, 1)
		var te *comm.TimeoutError
		if !errors.As(err, &te) || te.PE != me || !errors.Is(err, comm.ErrTimeout) {
			t.Errorf("WaitUntil a signal nobody sends: %v, want a *comm.TimeoutError of PE %d", err, me)
		}
		for _, x := range []comm.Buffer{sig, other, b} {
			if err := c.Free(x); err != nil {
				t.Fatal(err)
			}
		}
		if hb.Float32s() != nil || hb.Bytes() != nil {
			t.Errorf("the slices of a freed buffer are not nil")
		}
	})
	if err != nil || strings.Count(out, " passed\n") != 3 {
		t.Fatalf("mpirun: %v\n---- output ----\n%s", err, out)
	}
}

// TestDeadline: a PE that never reaches a barrier ends the job, and the
// message names it: PE 0 names every PE that did not arrive, and says which
// collective a PE waits in instead (which the desync check, on by default,
// reports before: here it is off); when PE 0 is the one missing, PE 1
// names it.
func TestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		absent int
		stall  func(c comm.Comm, b comm.Buffer) error
		check  string
		want   string
	}{
		{"PE2 stalls", 2, nil, "on",
			"symddp: comm: PE 0: barrier (collective #2): deadline of 2s passed; PEs not arrived: [2]; ending the job with MPI_Abort"},
		{"PE0 stalls", 0, nil, "on",
			"symddp: comm: PE 1: barrier (collective #2): deadline of 2s passed; PEs not arrived: [0] (and perhaps others: PE 0 would name them all); ending the job with MPI_Abort"},
		{"PE1 in another collective", 1, func(c comm.Comm, b comm.Buffer) error { return c.AllReduce(b, 0, 1, comm.Sum) }, "off",
			"symddp: comm: PE 0: barrier (collective #2): deadline of 2s passed; PEs not arrived: [1] (PE 1 is in allreduce); ending the job with MPI_Abort"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			env := []string{comm.EnvTimeout + "=2s", comm.EnvDesyncCheck + "=" + tc.check}
			opts := []string{"-x", comm.EnvTimeout, "-x", comm.EnvDesyncCheck}
			out, err := runJob(t, 3, opts, env, func(t *testing.T, c comm.Comm) {
				b, err := c.Alloc(comm.Float32, 1) // collective #1
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case c.MyPE() != tc.absent:
					err = c.Barrier() // collective #2
				case tc.stall != nil:
					err = tc.stall(c, b)
				default:
					time.Sleep(time.Hour) // never reaches the barrier
				}
				t.Fatalf("PE %d: returned %v; the watchdog should have ended the job", c.MyPE(), err)
			})
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("mpirun: %v; want a failed job whose output has\n%s\n---- output ----\n%s", err, tc.want, out)
			}
		})
	}
}

func fmtAny(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	s, _ := v.(string)
	return s
}
