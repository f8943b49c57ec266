package ddp

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/symddp/symddp/comm"
	_ "github.com/symddp/symddp/comm/shm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

type doneReq struct{}

func (doneReq) Wait() error { return nil }

// backend is a comm and an engine to train on; done releases them.
type backend struct {
	c    comm.Comm
	e    compute.Engine
	done func()
}

// cpuBackend is the CPU engine over a one-PE shm comm.
func cpuBackend(t *testing.T) backend {
	t.Helper()
	c, err := comm.Open("shm", comm.Config{PE: 0, NPEs: 1, HeapSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	e, err := cpu.New(cpu.Options{BLAS: blas.Gonum, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return backend{c: c, e: e, done: func() { _ = c.Close() }}
}

// emulatedBackend is an emulated CUDA engine over the comm of a one-PE
// world, whose buffers live in the engine's "device" memory, so that the
// trainer takes its GPU step path on a machine without a GPU.
func emulatedBackend(graphs bool) backend {
	w := newWorldOf(1, cuda.Options{DisableGraphs: !graphs})
	return backend{c: w.comm(0), e: w.engs[0], done: func() {}}
}

// trainRun trains the mlp on synthetic data with opts on b and returns the
// logged losses, the result and the final parameters. A stop is requested
// after step stopAfter (-1: never).
func trainRun(t *testing.T, b backend, opt optim.Optimizer, opts Options, stopAfter int) ([]float64, Result, []float32, error) {
	t.Helper()
	defer b.done()
	train, test, err := datasets.SyntheticSplit(600, 100, 20, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16, 16}, Classes: 4})
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts.Hooks.OnLog = func(li LogInfo) { losses = append(losses, li.Loss) }
	onStep := opts.Hooks.OnStep
	opts.Hooks.OnStep = func(si StepInfo) {
		if onStep != nil {
			onStep(si)
		}
		if si.Step == stopAfter {
			cancel()
		}
	}
	tr, err := New(b.c, b.e, m, opt, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	res, err := tr.Fit(ctx, train, test)
	return losses, res, tr.Params(), err
}

// compareRuns checks the GPU path's logs and parameters against the CPU's
// (float32 tolerance) and, when exact, the eager GPU run's against the
// graph run's bit for bit.
func compareRuns(t *testing.T, cl, gl, el []float64, cp, gp, ep []float32, cres, gres Result) {
	t.Helper()
	if len(cl) != len(gl) || len(cl) != len(el) || len(cl) < 5 || gres.Steps != cres.Steps {
		t.Fatalf("%d CPU logs, %d GPU logs, %d eager GPU logs; steps %d and %d", len(cl), len(gl), len(el), cres.Steps, gres.Steps)
	}
	for i := range cl {
		t.Logf("log %d: loss cpu %.7f  gpu-graph %.7f  gpu-eager %.7f", i, cl[i], gl[i], el[i])
		// The GEMMs of the two paths add in different orders: the first
		// window agrees to float32 noise, later ones drift as training
		// amplifies the differences (a high learning rate on purpose).
		tol := 1e-4
		if i > 0 {
			tol = 2e-2
		}
		if math.Abs(cl[i]-gl[i]) > tol*math.Max(1, math.Abs(cl[i])) {
			t.Errorf("log %d: loss %v on the CPU, %v on the GPU path", i, cl[i], gl[i])
		}
		if gl[i] != el[i] {
			t.Errorf("log %d: loss %v with graphs, %v without", i, gl[i], el[i])
		}
	}
	for i := range cp {
		if math.Abs(float64(cp[i]-gp[i])) > 2e-2 {
			t.Fatalf("param %d: %v on the CPU, %v on the GPU path", i, cp[i], gp[i])
		}
		if math.Float32bits(gp[i]) != math.Float32bits(ep[i]) {
			t.Fatalf("param %d: %v with graphs, %v without", i, gp[i], ep[i])
		}
	}
	// the host's waits for the device are timed on the device path only
	if cres.DeviceWait != 0 || gres.DeviceWait < 0 || gres.DeviceWait > gres.Elapsed {
		t.Errorf("host waited %v of %v on the CPU path, %v of %v on the GPU path", cres.DeviceWait, cres.Elapsed, gres.DeviceWait, gres.Elapsed)
	}
	if math.Abs(cres.Test.Accuracy-gres.Test.Accuracy) > 0.02 || !gres.Replicas.Identical {
		t.Errorf("test accuracy %v on the CPU, %v on the GPU path (replicas %v)", cres.Test.Accuracy, gres.Test.Accuracy, gres.Replicas)
	}
}

func baseOptions() Options {
	return Options{GlobalBatch: 64, Epochs: 2, LR: 0.1, Seed: 3, LogEvery: 3, ClipNorm: 2}
}

// The GPU path (pipeline, captured graphs replayed with each step's values,
// reports read a step late) trains like the CPU path; its graph and eager
// modes give the same bits.
func TestGPUPathMatchesCPU(t *testing.T) {
	sgd, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3})
	adamw, _ := optim.NewAdamW(optim.DefaultAdamWConfig())
	for name, o := range map[string]optim.Optimizer{"nesterov": sgd, "adamw": adamw} {
		t.Run(name, func(t *testing.T) {
			opts := baseOptions()
			if name == "adamw" {
				sched, err := optim.NewCosine(0.01, 0, 20)
				if err != nil {
					t.Fatal(err)
				}
				opts.LR, opts.Schedule = 0.01, sched
			}
			cl, cres, cp, err := trainRun(t, cpuBackend(t), o, opts, -1)
			if err != nil {
				t.Fatalf("CPU: %v", err)
			}
			gl, gres, gp, err := trainRun(t, emulatedBackend(true), o, opts, -1)
			if err != nil {
				t.Fatalf("GPU path: %v", err)
			}
			el, _, ep, err := trainRun(t, emulatedBackend(false), o, opts, -1)
			if err != nil {
				t.Fatalf("GPU path without graphs: %v", err)
			}
			compareRuns(t, cl, gl, el, cp, gp, ep, cres, gres)
		})
	}
}

// A stop request rides with the step's report, which is read a step late:
// the GPU path stops one step after the CPU path, on every PE alike.
func TestGPUPathStops(t *testing.T) {
	o, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	_, res, _, err := trainRun(t, emulatedBackend(true), o, baseOptions(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.Steps != 5 {
		t.Errorf("stop requested after step 3: stopped %v after %d steps; want stopped after 5", res.Stopped, res.Steps)
	}
	_, cres, _, err := trainRun(t, cpuBackend(t), o, baseOptions(), 3)
	if err != nil || !cres.Stopped || cres.Steps != 4 {
		t.Errorf("CPU path: stopped %v after %d steps (%v); want stopped after 4", cres.Stopped, cres.Steps, err)
	}
}

// TestGPUPathStopRidesWithTheControlWords: with several PEs a stop asked
// for on one PE reaches the others through the control words, reduced with
// the gradients on the device, and every PE stops after the same step; with
// one PE the words stay on the host (the slots carry none) and the stop
// takes effect as late as with several.
func TestGPUPathStopRidesWithTheControlWords(t *testing.T) {
	train, test, err := datasets.SyntheticSplit(600, 100, 20, 4, 7)
	require.NoError(t, err)
	for _, npes := range []int{1, 2} {
		w := newWorld(npes)
		res := make([]Result, npes)
		errs := make([]error, npes)
		extra := make([]int, npes) // control words a step's slot carries
		var wg sync.WaitGroup
		for pe := range npes {
			wg.Go(func() {
				m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16, 16}, Classes: 4})
				if err != nil {
					errs[pe] = err
					return
				}
				o, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var tr *Trainer
				opts := baseOptions()
				opts.Hooks.OnStep = func(si StepInfo) {
					if si.Step == 1 {
						if x := tr.strat.(*deviceStrategy).g.pipe.Slot(0).Extra; x != nil {
							extra[pe] = x.Size()
						}
					}
					if si.Step == 3 && pe == npes-1 {
						cancel()
					}
				}
				if tr, err = New(w.comm(pe), w.engs[pe], m, o, opts); err != nil {
					errs[pe] = err
					return
				}
				defer tr.Close()
				res[pe], errs[pe] = tr.Fit(ctx, train, test)
			})
		}
		wg.Wait()
		for pe := range npes {
			require.NoError(t, errs[pe], "%d PEs, PE %d", npes, pe)
			require.True(t, res[pe].Stopped, "%d PEs, PE %d", npes, pe)
			require.Equal(t, 5, res[pe].Steps, "%d PEs, PE %d: stop asked after step 3 on PE %d", npes, pe, npes-1)
			want := ctrlWords
			if npes == 1 {
				want = 0
			}
			require.Equal(t, want, extra[pe], "%d PEs, PE %d: control words in a slot", npes, pe)
		}
	}
}

// A non-finite step ends Fit with ErrNonFinite one step later, with the
// parameters of before the bad step (the device halted the updates).
func TestGPUPathNonFinite(t *testing.T) {
	o, _ := optim.NewSGD(optim.SGDConfig{})
	opts := baseOptions()
	opts.LR = 1e30
	opts.ClipNorm = 0
	_, _, params, err := trainRun(t, emulatedBackend(true), o, opts, -1)
	if !errors.Is(err, ErrNonFinite) {
		t.Fatalf("Fit with lr 1e30 = %v, want ErrNonFinite", err)
	}
	for i, p := range params {
		if math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) {
			t.Fatalf("param %d is %v after the halted step", i, p)
		}
	}
	opts.SkipNonFinite = true
	if _, res, _, err := trainRun(t, emulatedBackend(true), o, opts, -1); err != nil || res.Steps == 0 {
		t.Errorf("with SkipNonFinite: %v after %d steps, want a finished run", err, res.Steps)
	}
}

// Skipped steps reach the hooks on the GPU path too: step k's report is
// read with step k+1 (or at once on a step after which Fit reads the
// device), so StepInfo.Skipped tells of one step late; only two skips read
// on the same step (the late one and a sync step's own) count as one.
func TestGPUPathReportsSkippedSteps(t *testing.T) {
	o, _ := optim.NewSGD(optim.SGDConfig{})
	opts := baseOptions()
	opts.LR, opts.ClipNorm, opts.SkipNonFinite, opts.LogEvery = 1e30, 0, true, 10
	count := func(b backend) (skipped int, steps int) {
		opts.Hooks.OnStep = func(si StepInfo) {
			if si.Skipped {
				skipped++
			}
		}
		_, res, _, err := trainRun(t, b, o, opts, -1)
		if err != nil {
			t.Fatal(err)
		}
		return skipped, res.Steps
	}
	cpuSkipped, steps := count(cpuBackend(t))
	gpuSkipped, _ := count(emulatedBackend(true))
	// Every sync step can merge two reports: logs, epoch ends, the end.
	merged := steps/opts.LogEvery + opts.Epochs + 1
	if cpuSkipped < steps/2 || gpuSkipped < cpuSkipped-merged {
		t.Errorf("%d steps: %d reported skipped on the CPU path, %d on the GPU path (want at least %d)",
			steps, cpuSkipped, gpuSkipped, cpuSkipped-merged)
	}
}

// TestGPUPathAccumulates: with gradient accumulation the device step path
// runs the micro-batches of a step in its graph (a pipeline each), with the
// bits of the eager replicated path that ran them before (the same fold of
// the micro-batches' gradients), graphs or not, training as the CPU does.
func TestGPUPathAccumulates(t *testing.T) {
	run := func(b backend, eager bool) ([]float64, Result, []float32, string) {
		t.Helper()
		defer b.done()
		train, test, err := datasets.SyntheticSplit(600, 100, 20, 4, 7)
		require.NoError(t, err)
		o, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
		m, _ := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16, 16}, Classes: 4})
		opts := baseOptions()
		opts.Accumulate = 2
		var losses []float64
		opts.Hooks.OnLog = func(li LogInfo) { losses = append(losses, li.Loss) }
		tr, err := New(b.c, b.e, m, o, opts)
		require.NoError(t, err)
		defer tr.Close()
		if eager {
			tr.strat = replicatedStrategy{} // the path accumulation took before
		}
		res, err := tr.Fit(context.Background(), train, test)
		require.NoError(t, err)
		return losses, res, tr.Params(), tr.Strategy()
	}
	cl, cres, cp, _ := run(cpuBackend(t), false)
	gl, gres, gp, strat := run(emulatedBackend(true), false)
	require.Equal(t, "device", strat)
	el, _, ep, _ := run(emulatedBackend(false), false)
	rl, _, rp, rstrat := run(emulatedBackend(false), true)
	require.Equal(t, "replicated", rstrat)
	require.Equal(t, gl, el, "graphs and eager device steps")
	require.Equal(t, gl, rl, "the device path and the eager replicated path")
	for i := range gp {
		require.Equal(t, math.Float32bits(rp[i]), math.Float32bits(gp[i]), "parameter %d: device path %v, replicated path %v", i, gp[i], rp[i])
	}
	compareRuns(t, cl, gl, el, cp, gp, ep, cres, gres)
}

// After its warm-up, a step of the GPU path allocates nothing on the Go
// side: float inputs, float inputs in a batch large enough for a split
// gather (784 values by 512 rows, 1.6 MB), token ids, and the training set
// in device memory (indices only).
func TestGPUPathStepDoesNotAllocate(t *testing.T) {
	small, _, err := datasets.SyntheticSplit(2000, 10, 20, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	large, err := datasets.Synthetic(2000, 784, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := lmData(t)
	mlp := func(in int) models.Model {
		m, _ := models.New("mlp", models.Config{Input: []int{in}, Hidden: []int{16}, Classes: 4})
		return m
	}
	for _, c := range []struct {
		name  string
		m     models.Model
		data  datasets.Source
		batch int
		dev   DeviceDataMode
	}{
		{"float", mlp(20), small, 64, DeviceDataOff},
		{"split gather", mlp(784), large, 512, DeviceDataOff},
		{"tokens", &positionLM{T: lmT, V: lmV}, tokens, 64, DeviceDataAuto},
		{"resident", mlp(784), large, 512, DeviceDataOn},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
			b := emulatedBackend(true)
			opts := baseOptions()
			opts.LogEvery, opts.GlobalBatch, opts.DeviceData = 1000, c.batch, c.dev
			tr, err := New(b.c, b.e, c.m, o, opts)
			if err != nil {
				t.Fatal(err)
			}
			sm, err := datasets.NewShardSampler(c.data.Len(), opts.GlobalBatch, 1, 0, opts.Seed)
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.strat.prepare(tr, tr.totalSteps(sm.StepsPerEpoch()), c.data); err != nil {
				t.Fatal(err)
			}
			defer tr.strat.close()
			s := 0
			run := func() {
				if _, err := tr.strat.step(tr, sm, c.data, 0, s%sm.StepsPerEpoch(), false); err != nil {
					t.Fatal(err)
				}
				s++
			}
			for i := 0; i < 4; i++ { // eager, two captures, a replay
				run()
			}
			if n := testing.AllocsPerRun(10, run); n != 0 {
				t.Errorf("a step allocates %v times", n)
			}
		})
	}
}

// The device step path waits for an epoch's last step only when Fit
// evaluates after that epoch; other epochs end without a host read, and
// the run's last step always has one.
func TestHostReadAtEpochEnd(t *testing.T) {
	tr := &Trainer{opts: Options{LogEvery: 1000, EvalEvery: 2}}
	const spe, total = 10, 40
	last := func(epoch int) bool { return tr.hostReadAfter((epoch+1)*spe, epoch, spe-1, spe, total) }
	for epoch := range 3 {
		if last(epoch) {
			t.Errorf("no test set: a read after epoch %d", epoch)
		}
	}
	tr.fitTest = true
	for epoch, want := range []bool{false, true, false, true} {
		if got := last(epoch); got != want {
			t.Errorf("EvalEvery 2: read after epoch %d %v, want %v", epoch, got, want)
		}
	}
	tr.opts.EvalEvery = 0
	if last(1) || !last(3) {
		t.Errorf("EvalEvery 0: reads after epochs 1 and 3 (the run's end) %v and %v, want false and true", last(1), last(3))
	}
	if tr.hostReadAfter(15, 1, 4, spe, total) {
		t.Error("a read in the middle of an epoch")
	}
}

// samplerSpy is a strategy that records the sampler Fit hands it.
type samplerSpy struct {
	strategy
	sm *datasets.ShardSampler
}

func (s *samplerSpy) step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, i int, wantStop bool) (stepResult, error) {
	s.sm = sm
	return s.strategy.step(t, sm, ds, epoch, i, wantStop)
}

// TestFitPrefetchesEveryEpoch: over four epochs Fit's sampler computes
// only the first epoch's order on Fit's goroutine; the others were shuffled in the background while the
// epoch before trained (ShardSampler.Prefetch). On the device step path a
// synchronous shuffle between two steps left the GPU idle for about 0.4 ms
// an epoch.
func TestFitPrefetchesEveryEpoch(t *testing.T) {
	train, _, err := datasets.SyntheticSplit(600, 100, 20, 4, 7)
	require.NoError(t, err)
	for _, b := range []struct {
		name string
		be   func() backend
	}{{"cpu", func() backend { return cpuBackend(t) }}, {"device", func() backend { return emulatedBackend(true) }}} {
		be := b.be()
		m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16, 16}, Classes: 4})
		require.NoError(t, err)
		o, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
		opts := baseOptions()
		opts.Epochs, opts.MaxSteps = 4, 0
		tr, err := New(be.c, be.e, m, o, opts)
		require.NoError(t, err)
		spy := &samplerSpy{strategy: tr.strat}
		tr.strat = spy
		res, err := tr.Fit(context.Background(), train, nil)
		require.NoError(t, err)
		require.Equal(t, 4*spy.sm.StepsPerEpoch(), res.Steps, b.name)
		require.Equal(t, 1, spy.sm.InlineOrders(), "%s: epoch orders computed between steps", b.name)
		require.NoError(t, tr.Close())
		be.done()
	}
}
