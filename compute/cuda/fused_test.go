package cuda_test

import (
	"math"
	"strings"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// fusedRun is the result of some mlp steps on one engine.
type fusedRun struct {
	losses []float64
	params []float32
	fusion string
}

// runFusedMLP trains the default mlp for steps steps (SGD with momentum) on
// e, from the seed and batches every run shares; misalign feeds the input
// through a view that is not 16-byte aligned.
func runFusedMLP(t *testing.T, e *cuda.Engine, batch, steps int, misalign bool) fusedRun {
	t.Helper()
	o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	r := newMLPRun(t, e, batch, 5)
	if misalign {
		n := batch * 784
		buf := e.Alloc(n + 1).(*cuda.Tensor)
		r.x = e.View(compute.Arena{Dev: buf.DevicePtr(), N: n + 1}, 1, batch, 784)
	}
	xs, ys := batches(batch)
	var out fusedRun
	for s := 0; s < steps; s++ {
		out.losses = append(out.losses, r.step(t, o, xs[s], ys[s], s+1, 0.01, nil))
	}
	out.params = make([]float32, r.n)
	e.ReadTensor(out.params, r.p)
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	out.fusion = r.m.(*models.Sequential).Fusion()
	return out
}

// sameTraining checks that two runs agree to float32 tolerance.
func sameTraining(t *testing.T, what string, got, want fusedRun) {
	t.Helper()
	for i := range want.losses {
		if math.Abs(got.losses[i]-want.losses[i]) > 2e-5*math.Max(1, math.Abs(want.losses[i])) {
			t.Errorf("%s: step %d: loss %v, unfused %v", what, i+1, got.losses[i], want.losses[i])
		}
	}
	var worst float64
	for i := range want.params {
		worst = math.Max(worst, math.Abs(float64(got.params[i]-want.params[i])))
	}
	if worst > 1e-4 || math.IsNaN(worst) {
		t.Errorf("%s: parameters differ from the unfused run's by up to %v", what, worst)
	}
	t.Logf("%s: largest parameter difference to the unfused run: %.3g", what, worst)
}

func wantFusion(t *testing.T, fusion string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(fusion, p) {
			t.Errorf("Fusion() = %q, want it to contain %q", fusion, p)
		}
	}
}

const (
	fusedSteps = 8
	fusedBatch = 16
)

// The fused path (cuBLASLt epilogues, emulated) trains as the unfused one,
// step by step, eagerly and replayed from a graph, and says what it fused.
func TestFusedMatchesUnfusedEmulated(t *testing.T) {
	unfused := runFusedMLP(t, cudatest.NewEmulated(cuda.Options{DisableFused: true}), fusedBatch, fusedSteps, false)
	wantFusion(t, unfused.fusion, "fc1 unfused: "+cuda.FusedEnv+"=0", "fc3 unfused")
	fused := runFusedMLP(t, cudatest.NewEmulated(cuda.Options{}), fusedBatch, fusedSteps, false)
	t.Log(fused.fusion)
	wantFusion(t, fused.fusion,
		"fc1 fused: cublasLt bias+relu fwd (with mask), drelu+bgrad bwd in the next layer's dx GEMM, cublasLt dW GEMM",
		"fc2 fused: cublasLt bias+relu fwd (with mask), drelu+bgrad bwd in the next layer's dx GEMM, cublasLt dW GEMM, dx GEMM with fc1's drelu+bgrad",
		"fc3 fused: cublasLt bias fwd, bgrad in the dW GEMM, dx GEMM with fc2's drelu+bgrad")
	if strings.Contains(fused.fusion, "unfused") {
		t.Errorf("Fusion() = %q: some part unfused", fused.fusion)
	}
	sameTraining(t, "fused", fused, unfused)

	// cuda.Graph replay of the fused step gives the eager bits.
	o, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	xs, ys := batches(fusedBatch)
	r := newMLPRun(t, cudatest.NewEmulated(cuda.Options{}), fusedBatch, 5)
	var g *cuda.Graph
	for s := 0; s < fusedSteps; s++ {
		var l float64
		if s == 0 {
			l = r.step(t, o, xs[s], ys[s], 1, 0.01, nil)
		} else {
			l = r.step(t, o, xs[s], ys[s], s+1, 0.01, &g)
		}
		if l != fused.losses[s] {
			t.Errorf("step %d: loss %v from the graph, %v eagerly", s+1, l, fused.losses[s])
		}
	}
}

// When cuBLASLt has no algorithm for an epilogue, the parts that need it
// stay unfused and the training is the same.
func TestFusedFallbackEmulated(t *testing.T) {
	unfused := runFusedMLP(t, cudatest.NewEmulated(cuda.Options{DisableFused: true}), fusedBatch, fusedSteps, false)
	cases := []struct {
		reject []cudalib.Epilogue
		want   []string
	}{
		{[]cudalib.Epilogue{cudalib.EpiDReLUBGrad}, []string{
			"fc1 fused: cublasLt bias+relu fwd (with mask), relu/bias-grad kernel bwd",
			"fc2 fused: cublasLt bias+relu fwd (with mask), relu/bias-grad kernel bwd (unfused: dx GEMM with fc1's drelu+bgrad: emulated device: no algorithm",
		}},
		{[]cudalib.Epilogue{cudalib.EpiBiasReLUAux}, []string{
			"fc1 fused: cublasLt bias+relu fwd, relu/bias-grad kernel bwd (unfused: no ReLU mask: emulated device: no algorithm",
			"fc3 fused: cublasLt bias fwd, bgrad in the dW GEMM",
		}},
		{[]cudalib.Epilogue{cudalib.EpiBGradA}, []string{
			"fc3 fused: cublasLt bias fwd, relu/bias-grad kernel bwd, dx GEMM with fc2's drelu+bgrad (unfused: bias gradient: emulated device",
		}},
		{[]cudalib.Epilogue{cudalib.EpiBias, cudalib.EpiBGradA}, []string{
			"fc3 unfused: forward: emulated device: no algorithm for epilogue 1; bias gradient: emulated device",
			"fc2 fused: cublasLt bias+relu fwd (with mask), relu/bias-grad kernel bwd, dx GEMM with fc1's drelu+bgrad",
		}},
		{[]cudalib.Epilogue{cudalib.EpiBiasReLUAux, cudalib.EpiBiasReLU, cudalib.EpiBias, cudalib.EpiBGradA}, []string{
			"fc1 unfused: no ReLU mask", "fc2 unfused", "fc3 unfused",
		}},
	}
	for _, c := range cases {
		dev := cudatest.NewDevice()
		for _, ep := range c.reject {
			dev.RejectEpilogue(ep)
		}
		e := cuda.NewOnDevice(dev, cuda.Options{})
		got := runFusedMLP(t, e, fusedBatch, fusedSteps, false)
		t.Logf("reject %v: %s", c.reject, got.fusion)
		wantFusion(t, got.fusion, c.want...)
		sameTraining(t, "fallback", got, unfused)
	}
}

// A ReLU layer whose forward cannot be planned with the mask gives the
// mask's memory back to the pool.
func TestFusedNoMaskGivesMemoryBackEmulated(t *testing.T) {
	dev := cudatest.NewDevice()
	dev.RejectEpilogue(cudalib.EpiBiasReLUAux)
	e := cuda.NewOnDevice(dev, cuda.Options{})
	const batch, in, out = 16, 8, 200
	s := compute.LinearSpec{Name: "fc", Batch: batch, In: in, Out: out, Act: compute.ReLU,
		W: e.Alloc(out, in), B: e.Alloc(out), DW: e.Alloc(out, in), DB: e.Alloc(out), Y: e.Alloc(batch, out)}
	next, left := cuda.PoolMark(e)
	f, err := e.FuseLinear(s)
	if err != nil {
		t.Fatal(err)
	}
	wantFusion(t, f.Path(), "fused: cublasLt bias+relu fwd", "no ReLU mask")
	if n, l := cuda.PoolMark(e); n != next || l != left {
		t.Errorf("FuseLinear kept %d bytes of the pool for a mask it does not use", left-l)
	}
}

// An input that is not 16-byte aligned (the plans assume it is) runs that
// call unfused, and the next layer does not use a mask the forward did not
// write.
func TestFusedMisalignedInputEmulated(t *testing.T) {
	unfused := runFusedMLP(t, cudatest.NewEmulated(cuda.Options{DisableFused: true}), fusedBatch, fusedSteps, true)
	for _, misalign := range []bool{false, true} {
		dev := cudatest.NewDevice()
		e := cuda.NewOnDevice(dev, cuda.Options{})
		fused := runFusedMLP(t, e, fusedBatch, fusedSteps, misalign)
		sameTraining(t, "misaligned input", fused, unfused)
		// Per step: 8 cuBLASLt GEMMs (3 forward, fc3's dW with bgrad, the
		// dx GEMMs of fc3 and fc2, the dW GEMMs of fc2 and fc1); without
		// fc1's fused forward and its mask, 5 (fc2's dx and fc1's dW go
		// to sgemm).
		want := 8
		if misalign {
			want = 5
		}
		if got := dev.LtCalls(); got != want*fusedSteps {
			t.Errorf("misaligned %v: %d cuBLASLt GEMMs in %d steps, want %d", misalign, got, fusedSteps, want*fusedSteps)
		}
	}
}

// The weight-gradient GEMMs of fc3 and fc2 run on the side stream, each
// between a fork and a join (the emulator fails a side GEMM without a fork,
// and unpaired forks or joins), and give the bits of the run without it
// (SYMDDP_CUDA_OVERLAP=0).
func TestFusedOverlapEmulated(t *testing.T) {
	onDev := cudatest.NewDevice()
	on := cuda.NewOnDevice(onDev, cuda.Options{})
	withSide := runFusedMLP(t, on, fusedBatch, fusedSteps, false)
	t.Setenv(cuda.OverlapEnv, "0")
	offDev := cudatest.NewDevice()
	off := cuda.NewOnDevice(offDev, cuda.Options{})
	without := runFusedMLP(t, off, fusedBatch, fusedSteps, false)
	if got := onDev.SideCalls(); got != 2*fusedSteps {
		t.Errorf("%d GEMMs on the side stream in %d steps, want 2 per step", got, fusedSteps)
	}
	if got := offDev.SideCalls(); got != 0 {
		t.Errorf("with %s=0: %d GEMMs on the side stream, want 0", cuda.OverlapEnv, got)
	}
	for i := range without.params {
		if math.Float32bits(withSide.params[i]) != math.Float32bits(without.params[i]) {
			t.Fatalf("parameter %d: %v with the side stream, %v without", i, withSide.params[i], without.params[i])
		}
	}
}

// SYMDDP_CUDA_FUSED=0 keeps every layer unfused.
func TestFusedEnvOffEmulated(t *testing.T) {
	t.Setenv(cuda.FusedEnv, "0")
	e := cudatest.NewEmulated(cuda.Options{})
	if e.FusedEnabled() || !strings.Contains(e.Describe(), "unfused") {
		t.Fatalf("with %s=0: FusedEnabled %v, Describe %q", cuda.FusedEnv, e.FusedEnabled(), e.Describe())
	}
	got := runFusedMLP(t, e, fusedBatch, 2, false)
	wantFusion(t, got.fusion, "fc1 unfused: "+cuda.FusedEnv+"=0", "fc2 unfused", "fc3 unfused")
	if _, err := e.FuseLinear(compute.LinearSpec{}); err == nil {
		t.Error("FuseLinear succeeded with fusion off")
	}
}

// On the GPU: the fused step against the unfused one (SYMDDP_CUDA_FUSED=0's
// path), 20 steps at batch 256. The log shows which path each layer took.
func TestFusedMatchesUnfusedGPU(t *testing.T) {
	gpuEngine(t)
	off, err := cuda.New(cuda.Options{Device: -1, DisableFused: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = off.Close() })
	unfused := runFusedMLP(t, off, 256, 20, false)
	e := gpuEngine(t)
	if !e.FusedEnabled() {
		t.Skip("fused layers are off (" + cuda.FusedEnv + "=0)")
	}
	fused := runFusedMLP(t, e, 256, 20, false)
	t.Log("unfused: " + unfused.fusion)
	t.Log("fused:   " + fused.fusion)
	sameTraining(t, "fused on the GPU", fused, unfused)
}

// The project's tiled GEMM (cuda/sd_compute_tiled.cu), forced on every
// fused GEMM of the mlp (every transpose and epilogue the step uses: bias
// and ReLU with its mask, the ReLU derivative with the column sums, the
// row sums of the weight gradient), without and with k split over blocks,
// trains as the unfused path, and its bits are neither cuBLASLt's nor, split,
// the unsplit kernel's: each ran. A plan where it disagrees with cuBLASLt
// on random operands fails to build, which fails the test.
func TestFusedTiledGEMMGPU(t *testing.T) {
	gpuEngine(t)
	t.Setenv("SYMDDP_CUDA_TUNE", "0")
	engine := func(opts cuda.Options) *cuda.Engine {
		e, err := cuda.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	unfused := runFusedMLP(t, engine(cuda.Options{Device: -1, DisableFused: true}), 256, 20, false)
	lt := engine(cuda.Options{Device: -1})
	if !lt.FusedEnabled() {
		t.Skip("fused layers are off (" + cuda.FusedEnv + "=0)")
	}
	prev := runFusedMLP(t, lt, 256, 20, false)
	sameTraining(t, "cuBLASLt", prev, unfused)
	prevName := "cuBLASLt"
	for _, mode := range []string{"tiled", "tiled-split"} {
		t.Setenv("SYMDDP_CUDA_OWN_GEMM", mode)
		got := runFusedMLP(t, engine(cuda.Options{Device: -1}), 256, 20, false)
		wantFusion(t, got.fusion, prev.fusion)
		sameTraining(t, mode, got, unfused)
		same := 0
		for i := range got.params {
			if math.Float32bits(got.params[i]) == math.Float32bits(prev.params[i]) {
				same++
			}
		}
		if same == len(got.params) {
			t.Errorf("%s gave %s's bits in all %d parameters: it did not run", mode, prevName, same)
		}
		t.Logf("%s: %d of %d parameters have %s's bits", mode, same, len(got.params), prevName)
		prev, prevName = got, mode
	}
}
