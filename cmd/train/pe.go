package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// errStopped marks a run that a signal stopped early (exit code 130).
var errStopped = errors.New("stopped by a signal")

// reportedError is an error the PE has printed already (exit status 1).
type reportedError struct{ err error }

func (r reportedError) Error() string { return r.err.Error() }
func (r reportedError) Unwrap() error { return r.err }

// peRun is one PE's whole job: open the comm, build everything, train.
type peRun struct {
	o       *options
	dc      dataChoice
	cfg     comm.Config
	backend string
	localPE int // PE number on this host (for threads and GPUs)
	local   int // PEs on this host
	stdout  io.Writer
	stderr  io.Writer
}

func (r *peRun) run() (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	c, err := comm.Open(r.backend, r.cfg)
	if err != nil {
		return fmt.Errorf("open %s backend: %w", r.backend, err)
	}
	defer func() {
		var ue usageError
		if err != nil && !errors.As(err, &ue) && !errors.Is(err, errStopped) {
			// Say it now: closing may wait for the peers (MPI), or the job may
			// be torn down before this PE's error would be printed.
			fmt.Fprintf(r.stderr, "train: PE %d: %v\n", c.MyPE(), err)
			err = reportedError{err}
		}
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s backend: %w", r.backend, cerr)
		}
	}()
	me := c.MyPE()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if me == 0 {
		log = slog.New(newLineHandler(r.stderr))
	}

	e, err := r.engine(c, log)
	if err != nil {
		return err
	}
	train, test, err := loadData(r.dc, r.o.seed, r.o.trainLimit, dataShare{runDir: r.cfg.RunDir, first: me == 0,
		barrier: c.Barrier, warn: func(msg string) { fmt.Fprintln(r.stderr, "warning:", msg) }})
	if err != nil {
		return err
	}
	cfg := r.o.modelConfig()
	if spec := train.Spec(); !spec.Tokens {
		cfg.Input, cfg.Classes = spec.Input, spec.Classes
	}
	m, err := models.New(r.o.model, cfg)
	if err != nil {
		return usageError{err}
	}
	opt, err := r.optimizer()
	if err != nil {
		return usageError{err}
	}
	steps := r.totalSteps(train.Len())
	sched, err := optim.NewSchedule(r.o.schedule, optim.ScheduleConfig{
		LR: r.lr(), Warmup: r.o.warmup, Total: steps, StepSize: r.o.stepSize, Gamma: r.o.gamma, MinLR: r.o.minLR})
	if err != nil {
		return usageError{err}
	}
	bucket, _ := parseBytes("--bucket-size", r.o.bucketSize, true)
	if bucket == 0 {
		bucket = -1
	}
	rep := newReporter(r.o, me, r.stdout, r.stderr)
	defer rep.close()
	if r.dc.notice != "" && me == 0 {
		fmt.Fprintln(r.stderr, "warning:", r.dc.notice)
	}
	faults, err := parseFault(r.o.faultInject)
	if err != nil {
		return usageError{err}
	}
	hooks := rep.hooks()
	if faults != nil {
		hooks = faults.wrap(hooks, me, train)
	}
	tr, err := ddp.New(c, e, m, opt, ddp.Options{
		GlobalBatch: r.o.batch, Accumulate: r.o.accumulate, Epochs: r.o.epochs, MaxSteps: r.o.maxSteps,
		Seed: r.o.seed, Schedule: sched, ClipNorm: r.o.clipNorm,
		BucketBytes: int(bucket), ReplicatedUpdate: !r.o.shardUpdate,
		LogEvery: r.o.logEvery, CheckReplicasEvery: r.o.checkEvery, SkipNonFinite: r.o.skipNaN,
		EvalEvery: r.evalEveryEpochs(), EvalEverySteps: r.evalEverySteps(), EvalLimit: r.o.evalBatches * r.o.batch,
		Checkpoint: ddp.CheckpointOptions{Dir: r.o.ckptDir, Every: r.o.ckptEvery, Keep: r.o.keepCkpt, Resume: r.o.resume},
		Hooks:      hooks,
	})
	if errors.Is(err, comm.ErrHeapExhausted) {
		return usagef("%v; the symmetric heap is too small for this model: raise --heap-size (or leave it unset to size it from the model)", err)
	}
	if err != nil {
		return err
	}
	defer tr.Close()
	res, err := tr.Fit(ctx, train, test)
	if err != nil {
		return err
	}
	if me == 0 {
		rep.summary(res, c, e)
		if g, ok := m.(*models.GPT); ok && r.o.sampleTokens > 0 && !res.Stopped {
			rep.sample(g, test, r.dc.name == "text", r.o.sampleTokens, r.o.seed)
		}
	}
	if res.Stopped {
		return errStopped
	}
	return nil
}

// engine builds the compute engine that goes with the backend.
func (r *peRun) engine(c comm.Comm, log *slog.Logger) (compute.Engine, error) {
	if r.backend == "nvshmem" {
		return newGPUEngine(c, r.o, log)
	}
	threads := r.o.threads
	if threads == 0 {
		threads = max(1, runtime.NumCPU()/max(1, r.local))
	}
	e, err := cpu.New(cpu.Options{Threads: threads, Logger: log})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// evalEveryEpochs and evalEverySteps read --eval-every: epochs for a
// classifier, steps for a language model.
func (r *peRun) evalEveryEpochs() int {
	if r.o.languageModel {
		return 0
	}
	return r.o.evalEvery
}

func (r *peRun) evalEverySteps() int {
	if !r.o.languageModel {
		return 0
	}
	return r.o.evalEvery
}

// lr is --lr or the optimizer's usual default.
func (r *peRun) lr() float32 {
	if r.o.lr > 0 {
		return r.o.lr
	}
	if r.o.optimizer == "sgd" {
		return 0.05
	}
	return 1e-3
}

// optimizer starts from the optimizer's defaults and overrides what the
// user set on the command line.
func (r *peRun) optimizer() (optim.Optimizer, error) {
	o := r.o
	c, err := optim.DefaultConfig(o.optimizer)
	if err != nil {
		return nil, err
	}
	if o.optimizer == "sgd" {
		c.Momentum, c.Nesterov = o.momentum, o.nesterov
	}
	if o.set("weight-decay") || o.optimizer != "adamw" {
		c.WeightDecay = o.weightDecay
	}
	if o.set("beta1") {
		c.Beta1 = o.beta1
	}
	if o.set("beta2") {
		c.Beta2 = o.beta2
	}
	if o.set("eps") {
		c.Eps = o.eps
	}
	return optim.New(o.optimizer, c)
}

// totalSteps is the number of optimizer steps of the run.
func (r *peRun) totalSteps(n int) int {
	spe := (n + r.o.batch - 1) / r.o.batch
	total := r.o.epochs * spe
	if r.o.maxSteps > 0 && (r.o.maxSteps < total || total == 0) {
		total = r.o.maxSteps
	}
	return total
}
