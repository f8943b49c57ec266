package ddp

import (
	"testing"

	"github.com/symddp/symddp/comm"
	_ "github.com/symddp/symddp/comm/nvshmem"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/optim"
)

// gpuBackends opens the one-PE nvshmem comm of a GPU test, or skips t
// with one line when there is no GPU library, and returns gpu: gpu(graphs)
// is a CUDA engine sharing the comm's stream. NVSHMEM starts once per
// process, so the runs of a test share the comm, which closes when t ends,
// and a process runs one such test.
func gpuBackends(t testing.TB, heapBytes int64) func(graphs bool) backend {
	t.Helper()
	c, err := comm.Open("nvshmem", comm.Config{PE: 0, NPEs: 1, HeapSize: heapBytes})
	if err != nil {
		t.Skip("no GPU library: " + err.Error())
	}
	t.Cleanup(func() { _ = c.Close() })
	return func(graphs bool) backend {
		e, err := cuda.OnComm(c, cuda.Options{DisableGraphs: !graphs})
		if err != nil {
			t.Fatal(err)
		}
		return backend{c: c, e: e, done: func() {}}
	}
}

// TestGPUFitMatchesCPU trains on the real GPU through the GPU step path
// (nvshmem comm of one PE, its stream shared with the CUDA engine; batches
// through the pipeline; steps replayed from CUDA graphs) and checks it
// against the CPU path and against the same run without graphs. NVSHMEM
// starts once per process, so the runs share one comm.
func TestGPUFitMatchesCPU(t *testing.T) {
	// Graph and eager runs use separate engines and are compared bit for
	// bit: keep cuBLASLt's heuristic choice instead of tuned algorithms.
	t.Setenv("SYMDDP_CUDA_TUNE", "0")
	gpu := gpuBackends(t, 64<<20)
	o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9, WeightDecay: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	opts := baseOptions()
	cl, cres, cp, err := trainRun(t, cpuBackend(t), o, opts, -1)
	if err != nil {
		t.Fatalf("CPU: %v", err)
	}
	gl, gres, gp, err := trainRun(t, gpu(true), o, opts, -1)
	if err != nil {
		t.Fatalf("GPU: %v", err)
	}
	el, _, ep, err := trainRun(t, gpu(false), o, opts, -1)
	if err != nil {
		t.Fatalf("GPU without graphs: %v", err)
	}
	compareRuns(t, cl, gl, el, cp, gp, ep, cres, gres)
}
