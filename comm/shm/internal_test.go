package shm

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
)

func TestAllocatorIsDeterministicAndCoalesces(t *testing.T) {
	run := func() []int64 {
		a := newAllocator(1024)
		var offs []int64
		x, _ := a.alloc(128)
		y, _ := a.alloc(256)
		z, _ := a.alloc(64)
		offs = append(offs, x, y, z)
		a.release(y, 256)
		w, _ := a.alloc(192) // first fit: in y's hole
		offs = append(offs, w)
		a.release(x, 128)
		a.release(w, 192)
		a.release(z, 64)
		if len(a.free) != 1 || a.free[0] != (span{0, 1024}) {
			t.Fatalf("after freeing everything the free list is %v, want one span of the whole heap", a.free)
		}
		if _, ok := a.alloc(1025); ok {
			t.Fatalf("alloc larger than the heap succeeded")
		}
		return offs
	}
	first, second := run(), run()
	want := []int64{0, 128, 384, 128}
	for i := range want {
		if first[i] != want[i] || second[i] != want[i] {
			t.Fatalf("offsets %v then %v, want %v both times", first, second, want)
		}
	}
}

func TestOwnSlicePartitionsOnCacheLines(t *testing.T) {
	for _, npes := range []int{1, 2, 3, 4, 7, 8} {
		for _, c := range []struct{ off, n int }{{0, 0}, {0, 1}, {3, 7}, {5, 1000}, {16, 1 << 20}, {1, 1<<20 + 3}} {
			next := c.off
			for p := 0; p < npes; p++ {
				lo, hi := ownSlice(c.off, c.n, npes, p)
				if lo != next || hi < lo {
					t.Fatalf("npes=%d off=%d n=%d: PE %d owns [%d, %d), want it to start at %d", npes, c.off, c.n, p, lo, hi, next)
				}
				if p > 0 && lo != c.off+c.n && lo%lineFloats != 0 {
					t.Fatalf("npes=%d off=%d n=%d: PE %d starts at %d, not on a cache line", npes, c.off, c.n, p, lo)
				}
				next = hi
			}
			if next != c.off+c.n {
				t.Fatalf("npes=%d off=%d n=%d: slices end at %d", npes, c.off, c.n, next)
			}
		}
	}
}

// TestCombineIsThePEOrderFold checks the unrolled kernels against the plain
// left fold for every PE count up to 9 and lengths around the unroll width.
func TestCombineIsThePEOrderFold(t *testing.T) {
	val := func(pe, i int) float32 {
		return float32(math.Ldexp(float64((pe*7919+i*104729)%20011-10005)/10007, (pe*3+i)%13-6))
	}
	for npes := 1; npes <= 9; npes++ {
		for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 100} {
			ins := make([][]float32, npes)
			for pe := range ins {
				ins[pe] = make([]float32, n)
				for i := range ins[pe] {
					ins[pe][i] = val(pe, i)
				}
			}
			for _, op := range []comm.Op{comm.Sum, comm.Mean, comm.Max, comm.Min} {
				acc := make([]float32, n)
				combine(acc, ins, op)
				for i := range acc {
					want := ins[0][i]
					for pe := 1; pe < npes; pe++ {
						switch op {
						case comm.Sum, comm.Mean:
							want += ins[pe][i]
						case comm.Max:
							want = max(want, ins[pe][i])
						case comm.Min:
							want = min(want, ins[pe][i])
						}
					}
					if op == comm.Mean {
						want /= float32(npes)
					}
					if math.Float32bits(acc[i]) != math.Float32bits(want) {
						t.Fatalf("npes=%d n=%d %s: element %d = %v, want %v", npes, n, op, i, acc[i], want)
					}
				}
			}
		}
	}
}

func openOne(t *testing.T, cfg comm.Config) *Comm {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAllReduceDoesNotAllocate(t *testing.T) {
	c := openOne(t, comm.Config{NPEs: 1})
	b, err := c.Alloc(comm.Float32, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		if err := c.AllReduce(b, 0, 10000, comm.Sum); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AllReduce: %v allocations per call, want 0", n)
	}
	if n := testing.AllocsPerRun(20, func() {
		r, err := c.IAllReduce(b, 0, 10000, comm.Mean)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("IAllReduce and Wait: %v allocations per call, want 0", n)
	}
}

func TestBFloat16ReductionIsUnsupported(t *testing.T) {
	c := openOne(t, comm.Config{NPEs: 1})
	b, err := c.Alloc(comm.BFloat16, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(b, 0, 8, comm.Sum); !errors.Is(err, comm.ErrKind) {
		t.Errorf("AllReduce of bfloat16: %v, want ErrKind", err)
	}
	if err := c.Broadcast(b, 0, 8, 0); err != nil {
		t.Errorf("Broadcast of bfloat16: %v", err)
	}
}

func TestHeapSizeIsEnforced(t *testing.T) {
	c := openOne(t, comm.Config{NPEs: 1, HeapSize: 1 << 20})
	whole, err := c.Alloc(comm.Float32, 1<<18)
	if err != nil {
		t.Fatalf("alloc of the whole 1 MiB heap: %v", err)
	}
	_, err = c.Alloc(comm.Byte, 1)
	if !errors.Is(err, comm.ErrHeapExhausted) || !strings.Contains(err.Error(), comm.EnvHeapSize) {
		t.Fatalf("alloc past the heap: %v, want ErrHeapExhausted naming %s", err, comm.EnvHeapSize)
	}
	if err := c.Free(whole); err != nil {
		t.Fatal(err)
	}
	if c.HeapFree() != 1<<20 {
		t.Fatalf("HeapFree() = %d after freeing everything, want %d", c.HeapFree(), 1<<20)
	}
}

func TestWaitUntilTimesOut(t *testing.T) {
	c := openOne(t, comm.Config{NPEs: 1, Timeout: 100 * time.Millisecond})
	sig, err := c.Alloc(comm.Uint64, 1)
	if err != nil {
		t.Fatal(err)
	}
	err = c.WaitUntil(sig, 0, comm.CmpEQ, 1)
	var te *comm.TimeoutError
	if !errors.As(err, &te) || te.Op != "wait_until" || te.PE != 0 {
		t.Fatalf("WaitUntil on a word nobody sets: %v, want a wait_until TimeoutError", err)
	}
}

func TestOpenChecks(t *testing.T) {
	if _, err := New(comm.Config{NPEs: 2, PE: 0}); err == nil || !strings.Contains(err.Error(), "launcher") {
		t.Errorf("2 PEs without a heap file: %v, want an error pointing at the launcher", err)
	}
	if _, err := New(comm.Config{NPEs: 2, PE: 2, HeapName: "x"}); !errors.Is(err, comm.ErrPERange) {
		t.Errorf("PE 2 of 2: %v, want ErrPERange", err)
	}
}

// TestSegmentShapeMismatch opens one heap file as two PEs that disagree on
// the job's shape: the second must be refused.
func TestSegmentShapeMismatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap")
	a, err := openSegment(path, 2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	if _, err := openSegment(path, 3, 1<<20); err == nil || !strings.Contains(err.Error(), "set up for 2 PEs") {
		t.Errorf("a PE of another job size: %v, want a refusal", err)
	}
	if _, err := openSegment(path, 2, 2<<20); err == nil || !strings.Contains(err.Error(), "heaps") {
		t.Errorf("a PE with another heap size: %v, want a refusal", err)
	}
	b, err := openSegment(path, 2, 1<<20)
	if err != nil {
		t.Fatalf("a PE of the same shape: %v", err)
	}
	b.close()
}
