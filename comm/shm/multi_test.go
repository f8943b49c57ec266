package shm_test

import (
	"errors"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch/launchtest"
)

// TestShmSpecifics runs the checks that are particular to shm in a job of 3
// PEs: host slices alias the heap, a mismatched Free is refused on every PE,
// and the collectives do not allocate.
func TestShmSpecifics(t *testing.T) {
	launchtest.Run(t, launchtest.Job{NPEs: 3, Timeout: time.Minute}, func(t *testing.T, c comm.Comm) {
		me, npes := c.MyPE(), c.NPEs()
		b, err := c.Alloc(comm.Float32, 64)
		if err != nil {
			t.Fatal(err)
		}
		hb, ok := b.(comm.HostBuffer)
		if !ok {
			t.Fatalf("a %T is not a HostBuffer", b)
		}
		hb.Float32s()[me] = float32(me + 1) // a plain store into the heap
		if err := c.Barrier(); err != nil {
			t.Fatal(err)
		}
		for pe := 0; pe < npes; pe++ {
			if v, err := c.G(b, pe, pe); err != nil || v != float32(pe+1) {
				t.Fatalf("G of PE %d's slot %d = %v, %v; want %d", pe, pe, v, err, pe+1)
			}
		}
		if hb.Uint64s() != nil || len(hb.Bytes()) != 256 {
			t.Fatalf("a float32 buffer: Uint64s %v, %d bytes; want nil and 256", hb.Uint64s(), len(hb.Bytes()))
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
		if n := testing.AllocsPerRun(10, func() {
			if err := c.AllReduce(b, 0, 64, comm.Sum); err != nil {
				t.Fatal(err)
			}
			if err := c.Broadcast(b, 0, 64, 1); err != nil {
				t.Fatal(err)
			}
			if err := c.Barrier(); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("AllReduce, Broadcast and Barrier in a job of 3: %v allocations, want 0", n)
		}
		for _, x := range []comm.Buffer{other, b} {
			if err := c.Free(x); err != nil {
				t.Fatal(err)
			}
		}
		if hb.Float32s() != nil {
			t.Errorf("Float32s of a freed buffer is not nil")
		}
	})
}
