package cuda_test

import (
	"strings"
	"testing"

	"github.com/symddp/symddp/compute/computetest"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
)

// gpuEngine returns an engine on the real GPU library, or skips the test
// with one line when there is none (no library, no GPU, no cgo).
func gpuEngine(t testing.TB) *cuda.Engine {
	t.Helper()
	e, err := cuda.New(cuda.Options{Device: -1})
	if err != nil {
		t.Skip("no GPU library: " + err.Error())
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// The conformance suite: the Engine's operations, then the operation
// groups the engine has (compute/ops.go: the GPT's in fp32).
func TestConformanceGPU(t *testing.T) { conformance(t, gpuEngine(t)) }

// The emulated device runs the engine's own logic (shapes, pool, staging,
// labels, panics) through the conformance suite on any machine.
func TestConformanceEmulated(t *testing.T) { conformance(t, cudatest.NewEmulated(cuda.Options{})) }

func conformance(t *testing.T, e *cuda.Engine) {
	computetest.Run(t, e)
	t.Run("Groups", func(t *testing.T) { computetest.RunGroups(t, e) })
}

// Transfers larger than a staging chunk go through the ring in pieces.
func TestLargeTransfersGPU(t *testing.T) { testLargeTransfers(t, gpuEngine(t)) }
func TestLargeTransfersEmulated(t *testing.T) {
	testLargeTransfers(t, cudatest.NewEmulated(cuda.Options{}))
}

func testLargeTransfers(t *testing.T, e *cuda.Engine) {
	const n = 3<<20 + 5 // 12 MiB and a bit: two chunks and a tail
	x := e.Alloc(n)
	src, dst := make([]float32, n), make([]float32, n)
	for i := range src {
		src[i] = float32(i)
	}
	e.SetTensor(x, src)
	e.ReadTensor(dst, x)
	for i := range src {
		if dst[i] != src[i] {
			t.Fatalf("element %d read back as %v, want %v", i, dst[i], src[i])
		}
	}
}

// What needs the host fails a capture; the engine goes on eagerly after it.
func TestCaptureRejectsHostWorkGPU(t *testing.T) { testCaptureRejectsHostWork(t, gpuEngine(t)) }
func TestCaptureRejectsHostWorkEmulated(t *testing.T) {
	testCaptureRejectsHostWork(t, cudatest.NewEmulated(cuda.Options{}))
}

func testCaptureRejectsHostWork(t *testing.T, e *cuda.Engine) {
	x := e.Alloc(4)
	if err := e.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	e.Scale(x, 2)
	e.SetTensor(x, []float32{1, 2, 3, 4})
	if g, err := e.EndCapture(); err == nil || g != nil || !strings.Contains(err.Error(), "SetTensor") {
		t.Fatalf("EndCapture after SetTensor = %v, %v; want an error naming SetTensor", g, err)
	}
	e.SetTensor(x, []float32{1, 2, 3, 4})
	e.Scale(x, 2)
	got := make([]float32, 4)
	e.ReadTensor(got, x)
	if got[3] != 8 || e.Sync() != nil {
		t.Errorf("after a failed capture: x = %v, Sync %v; want [2 4 6 8]", got, e.Sync())
	}
	if _, err := e.EndCapture(); err == nil {
		t.Error("EndCapture without BeginCapture succeeded")
	}
}

// A captured step replays with each launch's values: the loss scale comes
// from the step block, not from the capture.
func TestGraphReadsStepValuesGPU(t *testing.T) { testGraphReadsStepValues(t, gpuEngine(t)) }
func TestGraphReadsStepValuesEmulated(t *testing.T) {
	testGraphReadsStepValues(t, cudatest.NewEmulated(cuda.Options{}))
}

func testGraphReadsStepValues(t *testing.T, e *cuda.Engine) {
	logits, dl, stats := e.Alloc(1, 2), e.Alloc(1, 2), e.Alloc(3)
	labels := e.AllocLabels(1)
	e.SetTensor(logits, []float32{0, 0})
	e.SetLabels(labels, []int32{0})
	if err := e.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	e.SoftmaxCrossEntropy(logits, labels, dl, 1, stats)
	g, err := e.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, scale := range []float32{0.5, 4} {
		if err := g.Launch(cuda.StepValues{LossScale: scale}); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 2)
		e.ReadTensor(got, dl)
		if want := []float32{-0.5 * scale, 0.5 * scale}; got[0] != want[0] || got[1] != want[1] {
			t.Errorf("launch with scale %v: dlogits %v, want %v", scale, got, want)
		}
	}
}

// DeviceBytes counts the pool's chunks: a first allocation takes one, a
// piece of 16 MiB or more a chunk of its own size (the shared chunk keeps
// its room), and Close gives them back.
// TakenBytes counts what the pool handed out, in pieces of 256 bytes.
func TestDeviceBytes(t *testing.T) {
	e := cudatest.NewEmulated(cuda.Options{})
	if got := e.DeviceBytes(); got != 0 {
		t.Fatalf("a fresh engine: %d bytes", got)
	}
	e.Alloc(10)
	first := e.DeviceBytes()
	if first < 4*10 {
		t.Fatalf("after Alloc(10): %d bytes", first)
	}
	if got := e.TakenBytes(); got != 256 {
		t.Fatalf("after Alloc(10): %d bytes taken, want 256", got)
	}
	e.AllocBF16(200) // 400 bytes: two pieces
	if got := e.TakenBytes(); got != 256+512 {
		t.Fatalf("after AllocBF16(200): %d bytes taken, want %d", got, 256+512)
	}
	// a piece of 16 MiB or more has a chunk of its own: the shared chunk's
	// room stays for the small ones
	e.Alloc(5 << 20) // 20 MiB
	if got := e.DeviceBytes(); got != first+20<<20 {
		t.Fatalf("after a 20 MiB Alloc: %d bytes, want %d (a chunk of its own)", got, first+20<<20)
	}
	e.Alloc(4 << 20) // 16 MiB, then 15 MiB: the first its own chunk, the second in the shared one
	e.Alloc(15 << 18)
	if got := e.DeviceBytes(); got != first+36<<20 {
		t.Fatalf("after 16 and 15 MiB Allocs: %d bytes, want %d", got, first+36<<20)
	}
	first = e.DeviceBytes()
	e.Alloc(40 << 20) // 160 MiB: more than a chunk
	if got := e.DeviceBytes(); got < first+160<<20 {
		t.Fatalf("after a 160 MiB Alloc: %d bytes, want at least %d", got, first+160<<20)
	}
	if got, want := e.TakenBytes(), int64(768+(20+16+15+160)<<20); got != want {
		t.Fatalf("after a 160 MiB Alloc: %d bytes taken, want %d", got, want)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := e.DeviceBytes(); got != 0 {
		t.Fatalf("after Close: %d bytes", got)
	}
	if got := e.TakenBytes(); got != 0 {
		t.Fatalf("after Close: %d bytes taken", got)
	}
}
