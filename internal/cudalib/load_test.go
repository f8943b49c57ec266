//go:build cgo

package cudalib_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/cudalib/cudalibtest"
)

func TestLoadMissingSaysWhereAndHow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nowhere", cudalib.LibName)
	_, err := cudalib.Load(path)
	if !errors.Is(err, cudalib.ErrUnavailable) || !errors.Is(err, cudalib.ErrNotFound) {
		t.Fatalf("Load(%s) = %v, want ErrUnavailable and ErrNotFound", path, err)
	}
	for _, want := range []string{path, "cuda/build.sh", cudalib.EnvLib} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestLoadNotALibrary(t *testing.T) {
	path := filepath.Join(t.TempDir(), cudalib.LibName)
	if err := os.WriteFile(path, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := cudalib.Load(path)
	if !errors.Is(err, cudalib.ErrUnavailable) || errors.Is(err, cudalib.ErrNotFound) {
		t.Fatalf("Load of a text file = %v, want ErrUnavailable without ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
}

func TestLoadLibraryWithoutEntryPoints(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc:", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "partial.c")
	if err := os.WriteFile(src, []byte("const char *sd_last_error(void) { return \"\"; }\nint sd_abi_version(void) { return 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, cudalib.LibName)
	if out, err := exec.Command("gcc", "-shared", "-fPIC", src, "-o", lib).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	_, err := cudalib.Load(lib)
	if !errors.Is(err, cudalib.ErrUnavailable) {
		t.Fatalf("Load of a partial library = %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"lacks entry points", "sd_device_count", "sd_allreduce_enqueue", "cuda/build.sh"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestLoadFromEnvironmentOnce(t *testing.T) {
	path := cudalibtest.BuildFake(t)
	t.Setenv(cudalib.EnvLib, path)
	a, err := cudalib.Load("")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cudalib.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.Path() != path {
		t.Fatalf("two loads of %s gave %p (%s) and %p", path, a, a.Path(), b)
	}
	if v := a.ABIVersion(); v != cudalib.ABIVersion {
		t.Fatalf("ABI %d, want %d", v, cudalib.ABIVersion)
	}
}

func TestLoadRefusesOtherABI(t *testing.T) {
	path := cudalibtest.BuildFake(t)
	t.Setenv("FAKE_SD_ABI", "99")
	_, err := cudalib.Load(path)
	if !errors.Is(err, cudalib.ErrUnavailable) || !strings.Contains(err.Error(), "C ABI 99") || !strings.Contains(err.Error(), "cuda/build.sh") {
		t.Fatalf("Load of an ABI-99 library = %v", err)
	}
}

func TestNoDeviceError(t *testing.T) {
	lib, err := cudalib.Load(cudalibtest.BuildFake(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_SD_NO_DEVICE", "1")
	_, err = lib.DeviceCount()
	if !errors.Is(err, cudalib.ErrNoDevice) {
		t.Fatalf("DeviceCount = %v, want ErrNoDevice", err)
	}
	if want := "sd_device_count: fake: no usable GPU: cudaGetDeviceCount: no CUDA-capable device is detected"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
}

// TestEntryPointsRoundTrip drives the one-PE fake through the Go API: values
// in and out of every kind of call, and library errors with their messages.
func TestEntryPointsRoundTrip(t *testing.T) {
	lib, err := cudalib.Load(cudalibtest.BuildFake(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.BarrierEnqueue(); !errors.Is(err, cudalib.ErrState) {
		t.Fatalf("barrier before init = %v, want ErrState", err)
	}
	uid, err := lib.UniqueID()
	if err != nil || len(uid) != 128 {
		t.Fatalf("UniqueID = %d bytes, %v", len(uid), err)
	}
	info, err := lib.Init(cudalib.InitArgs{Bootstrap: cudalib.UniqueID, NPEs: 1, Device: -1, UID: uid})
	if err != nil {
		t.Fatal(err)
	}
	if info.NPEs != 1 || info.PE != 0 || !info.AllReachable || info.DeviceName != "fake GPU" || info.MaxBlocks != 2 {
		t.Fatalf("Info = %+v", info)
	}
	b, err := lib.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if b.Ptr() == 0 || b.Bytes() != 64 {
		t.Fatalf("buffer at %#x of %d bytes", b.Ptr(), b.Bytes())
	}
	src := []byte("0123456789abcdef")
	if err := lib.Put(b, 8, src, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	if err := lib.Get(got, b, 8, 0); err != nil || string(got) != string(src) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	// A call that succeeds allocates nothing: the collectives of every
	// training step go through the same path.
	if n := testing.AllocsPerRun(50, func() {
		if err := lib.AllReduceEnqueue(b, 0, 4, cudalib.Float32, cudalib.Sum, cudalib.Auto); err != nil {
			t.Fatal(err)
		}
		if err := lib.ReduceScatterEnqueue(b, 0, 4, 4, cudalib.Float32, cudalib.Sum); err != nil {
			t.Fatal(err)
		}
		if err := lib.AllGatherEnqueue(b, 0, 16, 16); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per AllReduceEnqueue, ReduceScatterEnqueue and AllGatherEnqueue, want 0", n)
	}
	// A shard longer than the largest shard, or past the buffer, is refused.
	if err := lib.ReduceScatterEnqueue(b, 0, 8, 4, cudalib.Float32, cudalib.Sum); !errors.Is(err, cudalib.ErrArgument) || !strings.HasPrefix(err.Error(), "sd_reduce_scatter_enqueue: ") {
		t.Fatalf("reduce-scatter of a shard longer than span = %v", err)
	}
	if err := lib.AllGatherEnqueue(b, 60, 68, 8); !errors.Is(err, cudalib.ErrArgument) || !strings.HasPrefix(err.Error(), "sd_allgather_enqueue: ") {
		t.Fatalf("all-gather past the buffer = %v", err)
	}
	err = lib.Put(b, 60, src, 0)
	if !errors.Is(err, cudalib.ErrArgument) || err.Error() != "sd_put: fake: span past the buffer" {
		t.Fatalf("put past the end = %v", err)
	}
	if err := lib.PutSignal(b, 0, nil, b, 56, 5, cudalib.SignalAdd, 0); err != nil {
		t.Fatal(err)
	}
	if err := lib.PutSignal(b, 0, nil, b, 56, 2, cudalib.SignalAdd, 0); err != nil {
		t.Fatal(err)
	}
	if v, err := lib.ReadU64(b, 56); err != nil || v != 7 {
		t.Fatalf("signal word = %d, %v; want 7", v, err)
	}
	all, err := lib.AllGatherU64([]uint64{3, 1 << 40}, 1)
	if err != nil || len(all) != 2 || all[0] != 3 || all[1] != 1<<40 {
		t.Fatalf("AllGatherU64 = %v, %v", all, err)
	}
	if err := lib.AllGatherU64Enqueue([]uint64{9}); err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, 1)
	if err := lib.AllGatherU64Result(out, 1); err != nil || out[0] != 9 {
		t.Fatalf("AllGatherU64Result = %v, %v", out, err)
	}
	ev, err := lib.EventRecord()
	if err != nil || ev == 0 {
		t.Fatalf("EventRecord = %v, %v", ev, err)
	}
	if done, err := lib.EventQuery(ev); err != nil || !done {
		t.Fatalf("EventQuery = %v, %v", done, err)
	}
	if d, err := lib.TimeAllReduce(b, 16, cudalib.Float32, cudalib.Sum, cudalib.Auto, 1, 1000); err != nil || d.Microseconds() != 1000 {
		t.Fatalf("TimeAllReduce = %v, %v", d, err)
	}
	dev, err := lib.DevAlloc(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.CopyHtoD(dev, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 4)
	if err := lib.CopyDtoH(back, dev); err != nil || string(back) != "\x01\x02\x03\x04" {
		t.Fatalf("device round trip = %v, %v", back, err)
	}
	if err := lib.DevFree(dev); err != nil {
		t.Fatal(err)
	}
	if err := lib.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := lib.Finalize(true); err != nil {
		t.Fatal(err)
	}
	_, err = lib.Init(cudalib.InitArgs{Bootstrap: cudalib.UniqueID, NPEs: 1, UID: uid})
	if !errors.Is(err, cudalib.ErrState) || !strings.Contains(err.Error(), "cannot start again") {
		t.Fatalf("second init after finalize = %v", err)
	}
}
