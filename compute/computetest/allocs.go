package computetest

import (
	"testing"

	"github.com/symddp/symddp/compute"
)

// Every operation of a training step runs without allocating.
func testNoAllocs(t *testing.T, e compute.Engine) {
	const batch, in, out = 64, 100, 70
	r := rng(5)
	x, w := tensorOf(e, randVals(r, batch*in), batch, in), tensorOf(e, randVals(r, out*in), out, in)
	bias, y := tensorOf(e, randVals(r, out), out), e.Alloc(batch, out)
	dw, db, dx := e.Alloc(out, in), e.Alloc(out), e.Alloc(batch, in)
	dy, stats := e.Alloc(batch, out), e.Alloc(3)
	labels := e.AllocLabels(batch)
	host := make([]int32, batch)
	for i := range host {
		host[i] = int32(i % out)
	}
	host[batch-1] = -1
	hostY := make([]float32, batch*out)
	ops := map[string]func(){
		"SetLabels": func() { e.SetLabels(labels, host) },
		"Gemm":      func() { e.Gemm(false, true, 1, x, w, 0, y) },
		"BiasAct":   func() { e.BiasAct(y, bias, compute.ReLU) },
		"SoftmaxCrossEntropy": func() {
			e.SoftmaxCrossEntropy(y, labels, dy, 1.0/batch, stats)
		},
		"BiasActBackward": func() { e.BiasActBackward(dy, y, db, compute.ReLU, false) },
		"GemmTransA":      func() { e.Gemm(true, false, 1, dy, x, 0, dw) },
		"GemmNoTrans":     func() { e.Gemm(false, false, 1, dy, w, 0, dx) },
		"Accumulate":      func() { e.Accumulate(dw, dw) },
		"Scale":           func() { e.Scale(dw, 0.5) },
		"SumSquares":      func() { _ = e.SumSquares(dw) },
		"Copy":            func() { e.Copy(dx, x) },
		"Zero":            func() { e.Zero(stats) },
		"SetTensor":       func() { e.SetTensor(y, hostY) },
		"ReadTensor":      func() { e.ReadTensor(hostY, y) },
		"Sync":            func() { _ = e.Sync() },
	}
	for name, op := range ops {
		if n := testing.AllocsPerRun(5, op); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}
