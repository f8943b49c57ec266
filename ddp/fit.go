package ddp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/optim"
)

// Fit trains for Options.Epochs over train (or Options.MaxSteps steps),
// evaluates on test (may be nil), checks the replicas and returns the
// result. It is collective. Cancelling ctx on any PE stops every PE after
// the same step (the stop request rides along with the gradient
// allreduce); a final checkpoint is written when checkpoints are on. A
// periodic checkpoint that cannot be saved (ErrCheckpointSave) is reported
// to OnWarning and the run goes on; when the final one cannot, Fit still
// evaluates and returns the complete Result, with that error.
func (t *Trainer) Fit(ctx context.Context, train, test datasets.Source) (Result, error) {
	t.mustBeOpen()
	if err := t.checkDataset("training", train); err != nil {
		return Result{}, err
	}
	if test != nil {
		if err := t.checkDataset("test", test); err != nil {
			return Result{}, err
		}
	}
	t.fitTest = test != nil
	P := t.c.NPEs()
	sm, err := datasets.NewShardSampler(train.Len(), t.opts.GlobalBatch, P, t.c.MyPE(), t.opts.Seed)
	if err != nil {
		return Result{}, err
	}
	spe := sm.StepsPerEpoch()
	total := t.totalSteps(spe)
	resumed, err := t.resume(spe)
	if err != nil {
		return Result{}, err
	}
	t.warnSettledAtZero(total)
	start := t.step
	if h := t.opts.Hooks.OnStart; h != nil {
		h(StartInfo{PE: t.c.MyPE(), NPEs: P, Params: t.n, StepsPerEpoch: spe, TotalSteps: total,
			MicroBatch: t.micro, StartStep: start, Resumed: resumed, Engine: t.e.Name(), Backend: t.c.Backend(),
			ShardedUpdate: t.ShardedUpdate(), Strategy: t.Strategy(), Tokens: t.tokensPerSample(), Reduction: t.reduction(),
			InitFrom: t.initSource})
	}

	if err := t.strat.prepare(t, total, train); err != nil {
		return Result{}, err
	}
	defer func() { _ = t.strat.close() }()

	var res Result
	// save writes a checkpoint; one that cannot be saved stops nothing: a
	// periodic one is a warning, the final one Fit's error
	var saveErr error
	save := func(epoch, s int, final bool) error {
		err := t.checkpoint(epoch, s)
		if !errors.Is(err, ErrCheckpointSave) {
			return err
		}
		if final {
			saveErr = err
		} else {
			t.warn(err.Error() + "; training goes on")
		}
		return nil
	}
	t0 := time.Now()
	win := window{t0: t0}
	t.e.Zero(t.stats)
	stopped := false
	epoch := start / spe
	for ; (t.opts.Epochs == 0 || epoch < t.opts.Epochs) && t.step < total && !stopped; epoch++ {
		for s, first := t.step-epoch*spe, true; s < spe && t.step < total; s, first = s+1, false {
			r, err := t.strat.step(t, sm, train, epoch, s, ctx.Err() != nil)
			if err != nil {
				return res, err
			}
			if first && (epoch+1)*spe < total {
				// the next epoch's order, shuffled while this one trains:
				// asked for after this epoch's first batch, which took the
				// order prefetched for it (ShardSampler.Prefetch)
				sm.Prefetch(epoch + 1)
			}
			res.Samples += int64(sm.Labelled(s))
			res.DeviceWait += r.waited
			win.samples += int64(sm.Labelled(s))
			if h := t.opts.Hooks.OnStep; h != nil {
				h(StepInfo{Step: t.step, Epoch: epoch, StepInEpoch: s, LR: t.opts.lr(t.step), Skipped: r.skipped})
			}
			if t.logDue(t.step, total, r.stop) {
				if res.Train, err = t.logWindow(&win, epoch); err != nil {
					return res, err
				}
			}
			if t.replicaCheckDue(t.step) {
				rep, err := t.CheckReplicas()
				if err != nil {
					return res, err
				}
				if !rep.Identical {
					return res, shared(fmt.Errorf("step %d: %s", t.step, rep))
				}
			}
			if test != nil && t.evalDue(t.step) && t.step < total && !r.stop {
				m, err := t.Evaluate(test)
				if err != nil {
					return res, err
				}
				if h := t.opts.Hooks.OnEval; h != nil {
					h(t.step, m)
				}
			}
			if t.checkpointDue(t.step, total, r.stop) {
				if err := save(epoch, s+1, false); err != nil {
					return res, err
				}
			}
			if r.stop {
				stopped = true
				break
			}
		}
		if stopped || t.step-epoch*spe < spe {
			break // stopped, or MaxSteps ended the run inside the epoch
		}
		ei := EpochInfo{Epoch: epoch, Step: t.step, Elapsed: time.Since(t0)}
		if t.epochEvalDue(epoch, t.step, total) {
			if ei.Test, err = t.Evaluate(test); err != nil {
				return res, err
			}
			ei.Evaluated = true
		}
		if h := t.opts.Hooks.OnEpochEnd; h != nil {
			h(ei)
		}
	}
	res.Elapsed = time.Since(t0)
	res.Steps = t.step
	res.Epochs = t.step / spe
	res.Stopped = stopped
	if sec := res.Elapsed.Seconds(); sec > 0 {
		res.SamplesPerSec = float64(res.Samples) / sec
	}
	if t.opts.Checkpoint.Dir != "" && t.step > start {
		s := t.step - (t.step/spe)*spe
		if err := save(t.step/spe, s, true); err != nil {
			return res, err
		}
	}
	if test != nil && !stopped {
		if res.Test, err = t.Evaluate(test); err != nil {
			return res, err
		}
	}
	if res.Replicas, err = t.CheckReplicas(); err != nil {
		return res, err
	}
	if res.DeviceBytes, err = t.gatherDeviceBytes(); err != nil {
		return res, err
	}
	if !res.Replicas.Identical {
		return res, shared(fmt.Errorf("after training: %s", res.Replicas))
	}
	return res, saveErr
}

// totalSteps is the run's last step for epochs of spe steps: Options.Epochs
// of them, or Options.MaxSteps when that is fewer or Epochs is 0.
func (t *Trainer) totalSteps(spe int) int { return runSteps(t.opts.Epochs, t.opts.MaxSteps, spe) }

// runSteps is Options.Steps for epochs of spe steps.
func runSteps(epochs, maxSteps, spe int) int {
	if epochs == 0 && maxSteps == 0 {
		epochs = 1 // setDefaults'
	}
	total := epochs * spe
	if maxSteps > 0 && (maxSteps < total || epochs == 0) {
		total = maxSteps
	}
	return total
}

// warnSettledAtZero warns when the schedule reaches a learning rate of 0
// before the run's last step (a cosine Total made for fewer steps than the
// run trains, say): those steps would change nothing.
func (t *Trainer) warnSettledAtZero(total int) {
	s, ok := t.opts.Schedule.(optim.Settling)
	if !ok {
		return
	}
	at := s.Settled()
	if at < 1 || at > total || s.LR(at) != 0 {
		return
	}
	t.warn(fmt.Sprintf("the learning-rate schedule reaches 0 at step %d and this run trains %d steps: steps %d to %d would change nothing (make the schedule for the run's steps: Options.Steps gives them)",
		at, total, at, total))
}

// warn gives msg to Hooks.OnWarning or, without one, writes it to
// standard error on PE 0.
func (t *Trainer) warn(msg string) {
	if h := t.opts.Hooks.OnWarning; h != nil {
		h(msg)
	} else if t.c.MyPE() == 0 {
		fmt.Fprintf(os.Stderr, "ddp: warning: %s\n", msg)
	}
}

// When Fit reads device state after a step. The GPU step path (graph.go)
// waits for a step's device work exactly when hostReadAfter says so, and
// Fit decides each read with the functions hostReadAfter is made of, so
// that the two cannot drift apart.

// logDue reports whether Fit logs the metrics after step of a run of total
// steps; stop says the step stops the run.
func (t *Trainer) logDue(step, total int, stop bool) bool {
	return step%t.opts.LogEvery == 0 || step == total || stop
}

// replicaCheckDue reports whether Fit checks the replicas after step.
func (t *Trainer) replicaCheckDue(step int) bool {
	n := t.opts.CheckReplicasEvery
	return n > 0 && step%n == 0
}

// checkpointDue reports whether Fit writes a periodic checkpoint after step
// of a run of total steps; stop says the step stops the run (the final
// checkpoint is written after the loop).
func (t *Trainer) checkpointDue(step, total int, stop bool) bool {
	n := t.opts.Checkpoint.Every
	return n > 0 && step%n == 0 && step < total && !stop
}

// hostReadAfter reports whether Fit reads device state after step, the
// s-th of epoch's spe steps, in a run of total steps, when the step does
// not stop the run (one that does is always followed by a read): a metrics
// log, a replica check, a checkpoint, an evaluation (every EvalEverySteps,
// or at the end of every EvalEvery-th epoch) or the end of the run. An
// epoch without an evaluation ends without one: its last step's report is
// read with the next step's, as any other step's is, so that the device
// does not wait for the host between epochs (the small MLP at batch 4096
// ran 15 steps an epoch).
func (t *Trainer) hostReadAfter(step, epoch, s, spe, total int) bool {
	return step >= total || (s == spe-1 && t.epochEvalDue(epoch, step, total)) || t.logDue(step, total, false) ||
		t.evalDue(step) || t.replicaCheckDue(step) || t.checkpointDue(step, total, false)
}

// epochEvalDue reports whether Fit evaluates at the end of epoch, its
// last step being step of a run of total steps (EvalEvery, with a test set).
func (t *Trainer) epochEvalDue(epoch, step, total int) bool {
	n := t.opts.EvalEvery
	return t.fitTest && n > 0 && (epoch+1)%n == 0 && step < total
}

// evalDue reports whether Fit evaluates after step (EvalEverySteps).
func (t *Trainer) evalDue(step int) bool {
	n := t.opts.EvalEverySteps
	return n > 0 && step%n == 0
}

// tokensPerSample is a token model's context (tokens per sample), 0 for
// other models.
func (t *Trainer) tokensPerSample() int {
	if !t.spec.Tokens {
		return 0
	}
	return t.spec.InputSize()
}

// window accumulates throughput between two logs.
type window struct {
	t0      time.Time
	last    time.Time
	samples int64
}

// logWindow reduces the window's training metrics over PEs, calls OnLog
// and starts a new window. It is collective.
func (t *Trainer) logWindow(w *window, epoch int) (LogInfo, error) {
	t.e.ReadTensor(t.stats3[:], t.stats)
	sum, err := t.reduceMetrics(t.stats3)
	if err != nil {
		return LogInfo{}, fmt.Errorf("step %d: reduce metrics: %w", t.step, err)
	}
	t.e.Zero(t.stats)
	now := time.Now()
	since := w.last
	if since.IsZero() {
		since = w.t0
	}
	m := metricsOf(sum)
	li := LogInfo{Step: t.step, Epoch: epoch, Loss: m.Loss, Accuracy: m.Accuracy,
		Elapsed: now.Sub(w.t0), LR: t.opts.lr(t.step)}
	if d := now.Sub(since).Seconds(); d > 0 {
		li.SamplesPerSec = float64(w.samples) / d
		li.TokensPerSec = li.SamplesPerSec * float64(t.tokensPerSample())
	}
	w.last, w.samples = now, 0
	if h := t.opts.Hooks.OnLog; h != nil {
		h(li)
	}
	return li, nil
}
