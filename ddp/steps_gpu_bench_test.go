package ddp

import (
	"context"
	"fmt"
	"github.com/symddp/symddp/ddp/devicestep"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// BenchmarkMLPStepGPU times the small MLP's device step (784-256-256-10,
// batch 256, SGD with momentum, the training set in device memory: what
// symbench gpu-train runs through train) on the GPU, whole and in parts:
//
//   - fit: Fit's steps, pipeline and all (ns/op is one step);
//   - graph/train: the step's own graph replayed back to back, no pipeline;
//   - pipeline/graphs: the step's graphs with the pipeline's copies and
//     events between them; +reports: the host also waits for each step's
//     report one step late, as Fit does; +values: and each launch has its
//     own step values (step number, learning rate), as in Fit;
//   - graph/base: a graph of forward, backward and update only, on a batch
//     already on the device (what a loop with a resident batch runs);
//   - graph/base+gather, +ctrl, +report: base with one of the train
//     graph's other parts (the batch's gather, the report's store into
//     pinned memory) or of what a step with several PEs adds (the control
//     words' copy into the gradient arena: with one PE they stay on the
//     host).
//
// The parts are recorded from a running Fit (a hook at its step 100), so
// they use its tensors; their launches change the parameters, which does
// not matter here. Without a GPU library it skips.
func BenchmarkMLPStepGPU(b *testing.B) {
	gpu := gpuBackends(b, 512<<20)
	train, _, err := datasets.SyntheticSplit(60000, 100, 784, 10, 7)
	if err != nil {
		b.Fatal(err)
	}
	newTrainer := func(logEvery int, hook func(tr *Trainer, step int)) *Trainer {
		be := gpu(true)
		m, err := models.New("mlp", models.Config{Input: []int{784}, Hidden: []int{256, 256}, Classes: 10})
		if err != nil {
			b.Fatal(err)
		}
		o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
		if err != nil {
			b.Fatal(err)
		}
		var tr *Trainer
		opts := Options{GlobalBatch: 256, Epochs: 1 << 20, LR: 0.01, Seed: 1, LogEvery: logEvery, DeviceData: DeviceDataOn}
		opts.Hooks.OnStep = func(si StepInfo) { hook(tr, si.Step) }
		if tr, err = New(be.c, be.e, m, o, opts); err != nil {
			b.Fatal(err)
		}
		if tr.Strategy() != "device" {
			b.Fatalf("strategy %s, want device", tr.Strategy())
		}
		return tr
	}
	const warm = 100
	fit := func(name string, logEvery int) {
		b.Run(name, func(b *testing.B) {
			// Beside ns/op: the host's time between steps (from one OnStep
			// to the next) above 2x the median, as steps and as ns per step,
			// and the steps in their epochs where that happened (logged).
			var last time.Time
			var gaps []time.Duration
			var at []int
			tr := newTrainer(logEvery, func(tr *Trainer, step int) {
				now := time.Now()
				if step > warm && step <= warm+b.N {
					gaps = append(gaps, now.Sub(last))
					at = append(at, step)
				}
				last = now
				switch step {
				case warm:
					_ = tr.e.(*cuda.Engine).Sync()
					b.ResetTimer()
					last = time.Now()
				case warm + b.N:
					// the last step: its device work, not Fit's ending
					_ = tr.e.(*cuda.Engine).Sync()
					b.StopTimer()
				}
			})
			defer tr.Close()
			tr.opts.MaxSteps = warm + b.N
			gaps, at = make([]time.Duration, 0, b.N), make([]int, 0, b.N)
			res, err := tr.Fit(context.Background(), train, nil)
			if err != nil {
				b.Fatal(err)
			}
			sorted := slices.Clone(gaps)
			slices.Sort(sorted)
			if len(sorted) == 0 {
				return
			}
			med := sorted[len(sorted)/2]
			spe := (train.Len() + 255) / 256 // steps per epoch at batch 256
			var long time.Duration
			var where []string
			for i, d := range gaps {
				if d > 2*med {
					long += d - med
					if len(where) < 12 {
						where = append(where, fmt.Sprintf("%d (epoch step %d): %v", at[i], (at[i]-1)%spe, d.Round(time.Microsecond)))
					}
				}
			}
			b.ReportMetric(float64(med.Nanoseconds()), "median-gap-ns")
			b.ReportMetric(float64(long.Nanoseconds())/float64(b.N), "long-gap-ns/op")
			b.ReportMetric(float64(res.DeviceWait.Nanoseconds())/float64(res.Steps), "wait-ns/op")
			b.Logf("%d steps, median host gap %v, gaps over twice that at steps %s", b.N, med, strings.Join(where, ", "))
		})
	}
	fit("fit", 1<<20)
	fit("fit-log-every-100", 100) // train's logs as symbench gpu-train asks for them: each drains the pipeline
	var parts func(tr *Trainer)
	tr := newTrainer(1<<20, func(tr *Trainer, step int) {
		if step == warm {
			parts(tr)
		}
	})
	defer tr.Close()
	tr.opts.MaxSteps = warm + 10
	parts = func(tr *Trainer) {
		e := tr.e.(*cuda.Engine)
		g := tr.strat.(*deviceStrategy).g
		if g == nil || g.graphs[0] == nil || g.rows == nil {
			b.Fatal("no step graph of slot 0 with resident rows at step 100")
		}
		sl := g.pipe.Slot(0)
		ctrlSrc := e.Alloc(ctrlWords) // stands for a slot's control words (several PEs)
		scale := float32(1) / float32(tr.micro)
		v := devicestep.Values{LossScale: scale, Step: tr.step, LR: 0.01}
		replay := func(name string, gr devicestep.Graph) {
			b.Run(name, func(b *testing.B) {
				if err := e.Sync(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					if err := gr.Launch(v); err != nil {
						b.Fatal(err)
					}
				}
				if err := e.Sync(); err != nil {
					b.Fatal(err)
				}
			})
		}
		replay("graph/train", g.graphs[0])
		// the step's graphs with the pipeline's stream work between them
		// (copies on the copy stream, events), the host reading each
		// report one step late as Fit does or not at all
		piped := func(name string, reports, values bool) {
			b.Run(name, func(b *testing.B) {
				if err := e.Sync(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for i := range b.N {
					s := i % 2
					err := g.pipe.Fill(s)
					if err == nil {
						err = g.pipe.Submit(s)
					}
					vi := v
					if values { // each launch its own step and learning rate, as in Fit
						vi.Step, vi.LR = v.Step+i, 0.01*float32(1+i%7)/7
					}
					if err == nil {
						err = g.graphs[s].Launch(vi)
					}
					if err == nil {
						err = g.pipe.Release(s)
					}
					if err == nil && reports && i > 0 {
						_, err = g.pipe.Report(1 - s)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if err := e.Sync(); err != nil {
					b.Fatal(err)
				}
			})
		}
		piped("pipeline/graphs", false, false)
		piped("pipeline/graphs+reports", true, false)
		piped("pipeline/graphs+reports+values", true, true)
		record := func(gather, ctrl, report bool) devicestep.Graph {
			if err := g.e.BeginCapture(); err != nil {
				b.Fatal(err)
			}
			if ctrl {
				e.Copy(tr.ctrlView, ctrlSrc)
			}
			if gather {
				e.GatherResident(g.x, g.rows, sl.Tokens)
			}
			tr.m.Forward(models.Inputs{X: g.x, Targets: sl.Y}, scale, tr.stats)
			tr.m.Backward(nil)
			uerr := e.Update(tr.o, tr.pView, tr.gView, tr.step, 0.01, 0)
			if report && uerr == nil {
				uerr = g.pipe.StoreReport(0)
			}
			gr, err := g.e.EndStepCapture()
			if uerr != nil || err != nil {
				b.Fatal(uerr, err)
			}
			return gr
		}
		for _, p := range []struct {
			name                 string
			gather, ctrl, report bool
		}{{"graph/base", false, false, false}, {"graph/base+gather", true, false, false},
			{"graph/base+ctrl", false, true, false}, {"graph/base+report", false, false, true},
			{"graph/all", true, true, true}} {
			gr := record(p.gather, p.ctrl, p.report)
			replay(p.name, gr)
			if err := gr.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := tr.Fit(context.Background(), train, nil); err != nil {
		b.Fatal(err)
	}
}
