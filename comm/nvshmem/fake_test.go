package nvshmem

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/commtest"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/cudalib/cudalibtest"
)

// These tests run the Go side of the backend for real on any machine, over
// the fake one-PE library of cudalibtest (host memory, no CUDA).

// openFake opens a one-PE runtime over a fresh fake library and closes it
// at the end of the test if the test has not.
func openFake(t *testing.T) (*Comm, comm.Config) {
	t.Helper()
	clearLauncherEnv(t)
	cfg := comm.Config{NPEs: 1, Options: map[string]string{"lib": cudalibtest.BuildFake(t)}}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !c.closed {
			c.Close()
		}
	})
	return c, cfg
}

func TestOpenWithoutLibrary(t *testing.T) {
	clearLauncherEnv(t)
	missing := filepath.Join(t.TempDir(), cudalib.LibName)
	_, err := comm.Open(Name, comm.Config{Options: map[string]string{"lib": missing}})
	if !cudalib.Buildable() {
		if !errors.Is(err, comm.ErrUnavailable) || !strings.Contains(err.Error(), "without cgo") {
			t.Fatalf("open in a build without cgo: %v", err)
		}
		return
	}
	if !errors.Is(err, comm.ErrUnavailable) || !errors.Is(err, cudalib.ErrNotFound) {
		t.Fatalf("open without the library: %v, want ErrUnavailable and ErrNotFound", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, missing) || !strings.Contains(msg, "cuda/build.sh") {
		t.Fatalf("message %q: want one line naming %s and cuda/build.sh", msg, missing)
	}
	if active.Load() {
		t.Fatal("a failed open left the runtime marked active")
	}
}

func TestOpenWithoutGPU(t *testing.T) {
	clearLauncherEnv(t)
	lib := cudalibtest.BuildFake(t)
	t.Setenv("FAKE_SD_NO_DEVICE", "1")
	_, err := comm.Open(Name, comm.Config{Options: map[string]string{"lib": lib}})
	if !errors.Is(err, comm.ErrUnavailable) || !errors.Is(err, cudalib.ErrNoDevice) {
		t.Fatalf("open without a GPU: %v, want ErrUnavailable and ErrNoDevice", err)
	}
	if !strings.Contains(err.Error(), "no CUDA-capable device") {
		t.Fatalf("message %q does not say why", err)
	}
}

// TestConformanceFakeGPU runs the whole conformance suite on one PE.
func TestConformanceFakeGPU(t *testing.T) {
	c, cfg := openFake(t)
	if !c.FixedOrder() || c.Stream() == 0 || c.Info().DeviceName != "fake GPU" {
		t.Fatalf("FixedOrder %v, stream %#x, info %+v", c.FixedOrder(), c.Stream(), c.Info())
	}
	commtest.RunAll(t, c, commtest.Options{Reopen: func() (comm.Comm, error) { return comm.Open(Name, cfg) }})
}

func TestReopenAfterClose(t *testing.T) {
	c, cfg := openFake(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := comm.Open(Name, cfg)
	if !errors.Is(err, comm.ErrAlreadyInitialised) || !strings.Contains(err.Error(), "cannot start again") {
		t.Fatalf("open after close in the same process: %v", err)
	}
}

func TestDeviceBufferAndHeap(t *testing.T) {
	c, _ := openFake(t)
	free0 := c.HeapFree()
	b, err := c.Alloc(comm.BFloat16, 1000)
	if err != nil {
		t.Fatal(err)
	}
	db, ok := b.(comm.DeviceBuffer)
	if !ok || db.DevicePtr() == 0 {
		t.Fatalf("a %T with device pointer %#x", b, db.DevicePtr())
	}
	if used := free0 - c.HeapFree(); used != 2048 {
		t.Fatalf("2000 bytes took %d of the heap, want 2048 (512-byte granules)", used)
	}
	if err := c.AllReduce(b, 0, 1000, comm.Mean); err != nil {
		t.Fatalf("bf16 allreduce: %v", err)
	}
	if err := c.PutFloat32(b, 0, []float32{1}, 0); !errors.Is(err, comm.ErrKind) {
		t.Fatalf("float32 put into a bf16 buffer: %v, want ErrKind", err)
	}
	if err := c.Free(b); err != nil {
		t.Fatal(err)
	}
	if db.DevicePtr() != 0 || c.HeapFree() != free0 {
		t.Fatalf("after free: pointer %#x, heap free %d (was %d)", db.DevicePtr(), c.HeapFree(), free0)
	}
}

func TestHeapLimitFromConfig(t *testing.T) {
	clearLauncherEnv(t)
	c, err := New(comm.Config{HeapSize: 4096, Options: map[string]string{"lib": cudalibtest.BuildFake(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := c.Alloc(comm.Float32, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Alloc(comm.Byte, 1); !errors.Is(err, comm.ErrHeapExhausted) || !strings.Contains(err.Error(), "0 bytes free of the 4096-byte heap") {
		t.Fatalf("alloc past a full heap: %v", err)
	}
	if err := c.Free(a); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Alloc(comm.Byte, 4096); err != nil {
		t.Fatalf("alloc of the whole heap after a free: %v", err)
	}
}

// TestKernelTimeout: a wait the library reports as timed out becomes a
// *comm.TimeoutError naming the missing PE, leaves the runtime unusable for
// collectives, and Close then returns without meeting the peers.
func TestKernelTimeout(t *testing.T) {
	c, _ := openFake(t)
	b, err := c.Alloc(comm.Float32, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_SD_TIMEOUT", "1")
	err = c.Barrier()
	var te *comm.TimeoutError
	if !errors.As(err, &te) || te.Op != "barrier" || te.PE != 0 || len(te.Missing) != 1 || te.Missing[0] != 1 || te.Deadline != comm.DefaultTimeout {
		t.Fatalf("barrier: %v (%+v), want a TimeoutError naming PE 1", err, te)
	}
	err = c.AllReduce(b, 0, 8, comm.Sum)
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "unusable after an earlier failure") {
		t.Fatalf("allreduce after a timeout: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close after a timeout: %v", err)
	}
}

// TestOpenBadOneShotMax: a malformed one_shot_max option fails the open
// before NVSHMEM starts, so the process may open again.
func TestOpenBadOneShotMax(t *testing.T) {
	clearLauncherEnv(t)
	lib := cudalibtest.BuildFake(t)
	_, err := New(comm.Config{Options: map[string]string{"lib": lib, "one_shot_max": "lots"}})
	if err == nil || !strings.Contains(err.Error(), `option one_shot_max="lots": want bytes`) {
		t.Fatalf("open with one_shot_max=lots: %v", err)
	}
	if active.Load() {
		t.Fatal("a failed open left the runtime marked active")
	}
	c, err := New(comm.Config{Options: map[string]string{"lib": lib, "one_shot_max": "4096"}})
	if err != nil {
		t.Fatalf("open after a rejected option: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestEnqueueAllocatesNothing: the enqueue-only collectives, which a
// training step calls (and a CUDA graph captures) every step, allocate
// nothing on the Go heap, with the desync check off and on (their
// fingerprints handed to the library).
func TestEnqueueAllocatesNothing(t *testing.T) {
	c, _ := openFake(t)
	b, err := c.Alloc(comm.Float32, 40)
	if err != nil {
		t.Fatal(err)
	}
	for _, check := range []bool{false, true} {
		c.check = check
		if n := testing.AllocsPerRun(20, func() {
			if err := c.AllReduceEnqueue(b, 3, 30, comm.Mean); err != nil {
				t.Fatal(err)
			}
			if err := c.ReduceScatterEnqueue(b, 3, 30, comm.Mean); err != nil {
				t.Fatal(err)
			}
			if err := c.AllGatherEnqueue(b, 3, 30); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("desync check %v: %v allocations per enqueued collective, want 0", check, n)
		}
	}
	if c.calls != 60+3 { // AllocsPerRun runs its function once more to warm up
		t.Fatalf("%d calls numbered with the check on, want 63", c.calls)
	}
}

// TestShardedFake: on one PE the sharded collectives leave the data as it
// is and refuse bad arguments (kind, range, operator, foreign buffer) with
// the comm package's errors, without leaving the runtime unusable; after
// Close they fail with ErrClosed.
func TestShardedFake(t *testing.T) {
	c, _ := openFake(t)
	b, err := c.Alloc(comm.Float32, 40)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 40)
	for i := range want {
		want[i] = float32(i) - 7.5
	}
	if err := c.PutFloat32(b, 0, want, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.ReduceScatter(b, 0, 40, comm.Max); err != nil {
		t.Fatal(err)
	}
	if err := c.AllGather(b, 0, 40); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 40)
	if err := c.GetFloat32(got, b, 0, 0); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("element %d is %v after one PE's reduce-scatter and all-gather, want %v", i, got[i], want[i])
		}
	}
	bytes, err := c.Alloc(comm.Byte, 16)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		err  error
		is   error
	}{
		{"reduce-scatter of bytes", c.ReduceScatter(bytes, 0, 16, comm.Sum), comm.ErrKind},
		{"reduce-scatter past the end", c.ReduceScatter(b, 30, 11, comm.Sum), comm.ErrBounds},
		{"reduce-scatter with Op(9)", c.ReduceScatterEnqueue(b, 0, 4, comm.Op(9)), comm.ErrKind},
		{"all-gather past the end", c.AllGatherEnqueue(bytes, 1, 16), comm.ErrBounds},
		{"all-gather of a foreign buffer", c.AllGather(fakeBuffer{}, 0, 1), comm.ErrNotSymmetric},
	} {
		if !errors.Is(tc.err, tc.is) {
			t.Errorf("%s: %v, want %v", tc.what, tc.err, tc.is)
		}
	}
	// Byte buffers gather (any kind does).
	if err := c.AllGather(bytes, 1, 15); err != nil {
		t.Fatalf("all-gather of bytes: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.ReduceScatter(b, 0, 4, comm.Sum); !errors.Is(err, comm.ErrClosed) {
		t.Fatalf("reduce-scatter after close: %v", err)
	}
	if err := c.AllGatherEnqueue(b, 0, 4); !errors.Is(err, comm.ErrClosed) {
		t.Fatalf("all-gather after close: %v", err)
	}
}

// fakeBuffer is a comm.Buffer that no Comm made.
type fakeBuffer struct{}

func (fakeBuffer) Kind() comm.Kind { return comm.Float32 }
func (fakeBuffer) Len() int        { return 8 }
