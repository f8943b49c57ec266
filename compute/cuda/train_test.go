package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// mlpRun is the default mlp (784-256-256-10) built on one engine, its
// parameters initialised from a seed, with the loss and the batches.
type mlpRun struct {
	e      compute.Engine
	m      models.Network
	loss   *models.CrossEntropy
	p, g   compute.Tensor // whole arenas
	x      compute.Tensor
	y      compute.Labels
	params []float32 // host arena (CPU engine)
	state  [][]float32
	n      int
}

func newMLPRun(t *testing.T, e compute.Engine, batch int, seed uint64) *mlpRun {
	t.Helper()
	m, err := models.MLP(models.Config{})
	if err != nil {
		t.Fatal(err)
	}
	specs := m.Params()
	offsets, total := models.Layout(specs)
	host := models.InitArena(specs, seed)
	r := &mlpRun{e: e, m: m, n: total}
	var pa, ga compute.Arena
	if ce, ok := e.(*cuda.Engine); ok {
		pt, gt := ce.Alloc(total).(*cuda.Tensor), ce.Alloc(total).(*cuda.Tensor)
		pa, ga = compute.Arena{Dev: pt.DevicePtr(), N: total}, compute.Arena{Dev: gt.DevicePtr(), N: total}
	} else {
		r.params = host
		pa, ga = compute.HostArena(host), compute.HostArena(make([]float32, total))
	}
	var pv, gv []compute.Tensor
	for i, s := range specs {
		pv = append(pv, e.View(pa, offsets[i], s.Shape...))
		gv = append(gv, e.View(ga, offsets[i], s.Shape...))
	}
	r.p, r.g = e.View(pa, 0, total), e.View(ga, 0, total)
	e.SetTensor(r.p, host)
	if err := m.Build(e, pv, gv, batch); err != nil {
		t.Fatal(err)
	}
	r.x, r.y = e.Alloc(batch, 784), e.AllocLabels(batch)
	r.loss = models.NewCrossEntropy(e, batch, 10)
	return r
}

// step runs forward, loss and backward on (x, y) and the update, and
// returns the batch's mean loss. graph (CUDA engine only) launches g
// instead, capturing it first when it is nil.
func (r *mlpRun) step(t *testing.T, o optim.Optimizer, x []float32, y []int32, step int, lr float32, graph **cuda.Graph) float64 {
	t.Helper()
	e := r.e
	e.SetTensor(r.x, x)
	e.SetLabels(r.y, y)
	r.loss.Reset()
	scale := 1 / float32(len(y))
	work := func() error {
		r.m.Backward(r.loss.Apply(r.m.Forward(r.x), r.y, scale), nil)
		if ce, ok := e.(*cuda.Engine); ok {
			return ce.Update(o, r.p, r.g, step, lr, 0)
		}
		if r.state == nil {
			r.state = make([][]float32, o.Slots())
			for i := range r.state {
				r.state[i] = make([]float32, r.n)
			}
		}
		o.Update(r.params, compute.HostData(r.g), r.state, step, lr)
		return nil
	}
	if graph == nil {
		if err := work(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	} else {
		ce := e.(*cuda.Engine)
		if *graph == nil {
			if err := ce.BeginCapture(); err != nil {
				t.Fatal(err)
			}
			werr := work()
			g, err := ce.EndCapture()
			if werr != nil || err != nil {
				t.Fatalf("capture: %v, %v", werr, err)
			}
			*graph = g
			t.Cleanup(func() { _ = g.Close() })
		}
		if err := (*graph).Launch(cuda.StepValues{LossScale: scale, Step: step, LR: lr}); err != nil {
			t.Fatalf("step %d: launch: %v", step, err)
		}
	}
	loss, _, n := r.loss.Totals()
	return loss / float64(n)
}

// batches are 20 batches of synthetic images and labels, the same for
// every engine.
func batches(batch int) (xs [][]float32, ys [][]int32) {
	r := rand.New(rand.NewPCG(11, 12))
	for s := 0; s < 20; s++ {
		x, y := make([]float32, batch*784), make([]int32, batch)
		for i := range y {
			y[i] = int32(r.IntN(10))
			for j := 0; j < 784; j++ { // noise around a class-dependent pattern
				x[i*784+j] = float32(r.Float64()-0.5) + 0.5*float32((int(y[i])*7+j)%11-5)/5
			}
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	return xs, ys
}

// testTrainingMatchesCPU runs 20 steps of the mlp (SGD with momentum) on
// the CPU engine and on e from the same parameters and batches: the losses
// agree to float32 tolerance; a second run on e with the steps replayed from
// a captured graph gives the eager run's bits.
func testTrainingMatchesCPU(t *testing.T, batch int, newEngine func() *cuda.Engine) {
	ce, err := cpu.New(cpu.Options{BLAS: blas.Auto, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	xs, ys := batches(batch)
	cpuRun, gpuRun, graphRun := newMLPRun(t, ce, batch, 5), newMLPRun(t, newEngine(), batch, 5), newMLPRun(t, newEngine(), batch, 5)
	var g *cuda.Graph
	for s := 0; s < 20; s++ {
		step, lr := s+1, float32(0.01)
		lc := cpuRun.step(t, o, xs[s], ys[s], step, lr, nil)
		lg := gpuRun.step(t, o, xs[s], ys[s], step, lr, nil)
		var lgr float64
		if s == 0 {
			lgr = graphRun.step(t, o, xs[s], ys[s], step, lr, nil) // warm-up: allocates the state
		} else {
			lgr = graphRun.step(t, o, xs[s], ys[s], step, lr, &g)
		}
		t.Logf("step %2d: loss cpu %.7f  gpu %.7f  gpu-graph %.7f", step, lc, lg, lgr)
		if math.Abs(lc-lg) > 2e-5*math.Max(1, math.Abs(lc)) {
			t.Errorf("step %d: loss %v on the GPU, %v on the CPU", step, lg, lc)
		}
		if lgr != lg {
			t.Errorf("step %d: loss %v replayed from the graph, %v eagerly", step, lgr, lg)
		}
	}
	pg, pgr := make([]float32, gpuRun.n), make([]float32, gpuRun.n)
	gpuRun.e.ReadTensor(pg, gpuRun.p)
	graphRun.e.ReadTensor(pgr, graphRun.p)
	var worst float64
	for i := range pg {
		worst = math.Max(worst, math.Abs(float64(pg[i]-cpuRun.params[i])))
		if math.Float32bits(pg[i]) != math.Float32bits(pgr[i]) {
			t.Fatalf("param %d: %v eagerly, %v from the graph", i, pg[i], pgr[i])
		}
	}
	t.Logf("largest parameter difference GPU - CPU after 20 steps: %.3g", worst)
	if worst > 1e-4 {
		t.Errorf("parameters differ from the CPU's by up to %v after 20 steps", worst)
	}
}

func TestTrainingMatchesCPUGPU(t *testing.T) {
	gpuEngine(t)
	// The eager and the graph run use two engines; tuned plans may pick
	// different algorithms in each, and this test compares them bit for bit.
	t.Setenv("SYMDDP_CUDA_TUNE", "0")
	testTrainingMatchesCPU(t, 256, func() *cuda.Engine { return gpuEngine(t) })
}

func TestTrainingMatchesCPUEmulated(t *testing.T) {
	testTrainingMatchesCPU(t, 32, func() *cuda.Engine { return cudatest.NewEmulated(cuda.Options{}) })
}
