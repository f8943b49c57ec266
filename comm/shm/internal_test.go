package shm

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// TestFullHeapDirSaysSo: a heap file whose directory has no room left is
// an error that says the directory is full and what to do, not "symmetric
// heap exhausted" (which points at the heap size); it still wraps
// ErrHeapExhausted, as callers that fall back on a smaller plan expect, and
// ENOSPC. Needs root to mount a small tmpfs; skipped elsewhere.
func TestFullHeapDirSaysSo(t *testing.T) {
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).Run(); err != nil {
		t.Skipf("cannot mount a small tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	t.Setenv(comm.EnvHeapDir, dir)
	c := openOne(t, comm.Config{NPEs: 1, HeapName: "heap", HeapSize: 4 << 20})
	_, err := c.Alloc(comm.Float32, 1<<20)
	want := "shm: PE 0: alloc: float32×1048576: PE 0 could not reserve its copy in " + dir +
		": no space left on device (the directory is full: free space in it, or set SYMDDP_HEAP_DIR to a directory with room)"
	if err == nil || err.Error() != want || !errors.Is(err, comm.ErrHeapExhausted) || !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("alloc of 4 MiB in a 256 KiB tmpfs: %v\nwant %s (wrapping ErrHeapExhausted and ENOSPC)", err, want)
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
	a, err := openSegment(path, 2, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	if _, err := openSegment(path, 3, 1<<20, true); err == nil || !strings.Contains(err.Error(), "set up for 2 PEs") {
		t.Errorf("a PE of another job size: %v, want a refusal", err)
	}
	if _, err := openSegment(path, 2, 2<<20, true); err == nil || !strings.Contains(err.Error(), "heaps") {
		t.Errorf("a PE with another heap size: %v, want a refusal", err)
	}
	if _, err := openSegment(path, 2, 1<<20, false); err == nil || !strings.Contains(err.Error(), "desync check on, this one off (set SYMDDP_DESYNC_CHECK") {
		t.Errorf("a PE with the desync check off: %v, want a refusal naming the variable", err)
	}
	b, err := openSegment(path, 2, 1<<20, true)
	if err != nil {
		t.Fatalf("a PE of the same shape: %v", err)
	}
	b.close()
}

// A heap the address space cannot map (here larger than x86-64's or
// arm64's 47-bit user space, as an address-space limit refuses a smaller
// one) says that each PE maps every PE's heap and what to lower or raise.
func TestSegmentTooLargeToMap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap")
	_, err := openSegment(path, 4, 1<<46, true)
	if err == nil {
		t.Skip("a 256 TiB mapping succeeded here")
	}
	if want := "(each PE maps all 4 PEs' heaps of 70368744177664 bytes): cannot allocate memory: lower the heap size (train --heap-size) or the PE count, or raise the address-space limit (ulimit -v)"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
}
