package traincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/internal/settings"
	"github.com/symddp/symddp/internal/stopsignal"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
	"golang.org/x/sys/unix"
)

// stoppedError marks a run that a signal stopped early: exit status 128 +
// the signal (130 for SIGINT, 143 for SIGTERM).
type stoppedError struct{ sig syscall.Signal }

func (s stoppedError) Error() string { return fmt.Sprintf("stopped by %v", s.sig) }

// reportedError is an error the PE has printed, or handed to its launcher,
// already; code is the exit status.
type reportedError struct {
	err  error
	code int
}

func (r reportedError) Error() string { return r.err.Error() }
func (r reportedError) Unwrap() error { return r.err }

// notifySignals returns a context that SIGINT or SIGTERM cancels, and the
// signal that did (nil before). The first signal asks the run to stop after
// the step in progress (every PE agrees on which), which can take a while
// when a step is long: say writes that to w (PE 0 says it, so the job says
// it once), unless the signal is the launcher stopping the job after a
// PE failed (launch.Process.StoppedByLauncher), which it reports itself. A second signal ends the process at once, exit status 128 + the
// signal: what a PE that this process is (--pes 1, a rank of mpirun) must do
// itself; a PE of train's own launcher never sees one (a second signal
// there makes the launcher kill the PEs). With SYMDDP_STOP_STACKS=1 the
// signal first writes every goroutine's stack to stderr: a PE that the
// launcher stops because another gave up waiting for it shows where it was.
//
// what says what the first signal stops: "stopping after the step in
// progress, then a checkpoint" while training, or what is left to do after it.
func notifySignals(w io.Writer, say bool, what func() string) (ctx context.Context, got func() os.Signal, stop func()) {
	stacks := settings.Get(settings.StopStacks) == "1"
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var mu sync.Mutex
	var sig os.Signal
	go func() {
		var s os.Signal
		select {
		case s = <-ch:
		case <-done:
			return
		}
		if stacks {
			fmt.Fprintf(os.Stderr, "%v: the goroutines' stacks (SYMDDP_STOP_STACKS):\n", s)
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		}
		name := unix.SignalName(s.(syscall.Signal))
		if say && !proc.StoppedByLauncher() { // the launcher's stop after a failure: it reports the failure
			fmt.Fprintf(w, "%s: %s: %s; %s again stops at once\n", Program, name, what(), name)
		}
		mu.Lock()
		sig = s
		mu.Unlock()
		cancel()
		stopsignal.ExitOnSecond(w, Program, ch, done)
	}()
	got = func() os.Signal {
		mu.Lock()
		defer mu.Unlock()
		return sig
	}
	var once sync.Once
	return ctx, got, func() { once.Do(func() { signal.Stop(ch); close(done); cancel() }) }
}

// stopNote is what a first SIGINT or SIGTERM stops, as PE 0 says it:
// training stops after the step in progress (then writes a checkpoint,
// where --checkpoint-dir is given, unless mpirun kills the ranks first);
// once every step is done (trained), or under --eval-only, only the sample
// is left out.
func stopNote(o *options, mpiRank, trained bool) string {
	switch {
	case o.evalOnly:
		return "stopping after the evaluation, without a sample"
	case trained:
		return "the training is done: stopping after the final evaluation, without a sample"
	case o.ckptDir != "" && mpiRank:
		// mpirun passes a signal on and kills the ranks soon after, and
		// stops them all alike when one rank failed
		return "stopping after the step in progress, then a checkpoint, unless mpirun kills the ranks first (it does when a rank failed, or a step outlasts --mca odls_base_sigkill_timeout: docs/MPI.md)"
	case o.ckptDir != "":
		return "stopping after the step in progress, then a checkpoint"
	}
	return "stopping after the step in progress"
}

// withHidden adds to err, a checkpoint at path that does not fit this
// run's mlp, the --hidden it was trained with; err itself for other models.
func (r *peRun) withHidden(err error, path string) error {
	if r.o.model == "mlp" {
		if h := mlpHidden(path); h != "" {
			return fmt.Errorf("%w: the checkpoint's mlp has --hidden %s", err, h)
		}
	}
	return err
}

// mlpHidden is the --hidden of the mlp whose checkpoint path is ("256,256":
// the widths of fc1, fc2, ... but the last layer's, the classes), "" when
// it is not one: an mlp records no sizes, so a mismatch names tensor shapes
// alone.
func mlpHidden(path string) string {
	w, err := ddp.ReadWeights(path)
	if err != nil || w.Model != "mlp" {
		return ""
	}
	var widths []string
	for i := 1; ; i++ {
		s := w.Shape(fmt.Sprintf("fc%d.weight", i))
		if len(s) != 2 {
			break
		}
		widths = append(widths, strconv.Itoa(s[0]))
	}
	if len(widths) < 2 {
		return ""
	}
	return strings.Join(widths[:len(widths)-1], ",")
}

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
	// trained: every step is done (what is left: the final evaluation and
	// checks, the sample), so a signal stops no step
	var trained atomic.Bool
	what := func() string { return stopNote(r.o, proc.Role == launch.MPIRank, trained.Load()) }
	ctx, gotSignal, stop := notifySignals(r.stderr, r.cfg.PE == 0, what)
	defer stop()

	c, err := comm.Open(r.backend, r.cfg)
	if err != nil {
		return fmt.Errorf("open %s backend: %w", r.backend, err)
	}
	defer func() {
		if p := recover(); p != nil {
			// A panicking PE is out of step with its peers: closing the
			// backend would wait for them (or show them a collective they
			// do not call) before the panic is printed. It ends the process.
			panic(p)
		}
		if errors.Is(err, compute.ErrDeviceMemory) {
			err = fmt.Errorf("%w; %s", err, deviceMemoryHint(r.o))
		}
		var ue usageError
		var se stoppedError
		isUsage := errors.As(err, &ue)
		if err != nil && !errors.As(err, &se) && (!isUsage || proc.Role == launch.LocalPE) {
			// Say it now: closing may wait for the peers (MPI), or the job may
			// be torn down before this PE's error would be printed. A PE of
			// our launcher tells the launcher, which says it once.
			code := 1
			var fe finishedError
			switch {
			case isUsage:
				code = peExit(ue)
			case errors.As(err, &fe) && proc.Role == launch.LocalPE:
				code = exitFinished
			}
			if !proc.ReportFailure(err) && !leftToRankZero(err) {
				fmt.Fprintf(r.stderr, "%s: PE %d: %v\n", Program, c.MyPE(), err)
			}
			err = reportedError{err, code}
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
		return usageError{err: err}
	}
	rc := r.o.recipe
	opt, err := optim.New(rc.Optimizer, rc.Hyper) // checked in resolve
	if err != nil {
		return usageError{err: err}
	}
	steps := r.totalSteps(train.Len())
	rc = rc.forRun(steps)
	sched, err := rc.schedule(steps)
	if err != nil {
		return usageError{err: err}
	}
	bucket, _ := bucketBytes(r.o.bucketSize)
	rep, err := newReporter(r.o, me, r.stdout, r.stderr)
	if err != nil {
		return err
	}
	defer rep.close()
	rep.recipe = rc.describe(m.Params(), steps, c.NPEs())
	rep.byteText = r.dc.name == "text" && (r.dc.tokenizer == "" || r.dc.tokenizer == datasets.ByteTokenizer)
	if r.dc.notice != "" && me == 0 {
		fmt.Fprintln(r.stderr, "warning:", r.dc.notice)
	}
	faults, err := parseFault(r.o.faultInject)
	if err != nil {
		return usageError{err: err}
	}
	hooks := rep.hooks()
	if faults != nil {
		hooks = faults.wrap(hooks, me, train)
	}
	total := 0
	onStart, onStep := hooks.OnStart, hooks.OnStep
	hooks.OnStart = func(s ddp.StartInfo) {
		total = s.TotalSteps
		trained.Store(s.StartStep >= total)
		if onStart != nil {
			onStart(s)
		}
	}
	hooks.OnStep = func(s ddp.StepInfo) {
		trained.Store(s.Step >= total)
		if onStep != nil {
			onStep(s)
		}
	}
	tr, err := ddp.New(c, e, m, opt, ddp.Options{
		GlobalBatch: rc.Batch, Accumulate: rc.Accum, Epochs: rc.Epochs, MaxSteps: rc.MaxSteps,
		Seed: r.o.seed, Schedule: sched, ClipNorm: rc.ClipNorm, Recipe: rc.record(steps, r.dc),
		BucketBytes: bucket, ReplicatedUpdate: !r.o.shardUpdate, DeviceData: deviceDataMode(r.o.deviceData),
		GradDType: gradKind(r.o.gradDType),
		LogEvery:  r.o.logEvery, CheckReplicasEvery: r.o.checkEvery, SkipNonFinite: r.o.skipNaN,
		EvalEvery: r.evalEveryEpochs(), EvalEverySteps: r.evalEverySteps(), EvalLimit: r.o.evalBatches * r.o.batch,
		InitFrom:   r.o.initFrom,
		Checkpoint: ddp.CheckpointOptions{Dir: r.o.ckptDir, Every: r.o.ckptEvery, Keep: r.o.keepCkpt, Resume: r.o.resume},
		Hooks:      hooks,
	})
	if need, _ := modelHeap(r.o, r.backend); errors.Is(err, comm.ErrHeapExhausted) && r.o.heapSize != "" && need > r.cfg.HeapSize {
		return usagef("--heap-size %s is too small for this model, which needs about %s per PE: raise it (or leave it unset to size the heap from the model)",
			r.o.heapSize, sizeString(need))
	}
	var ie *ddp.InitError
	if errors.As(err, &ie) {
		return inputErr(r.withHidden(err, r.o.initFrom)) // one line, exit 2; the launcher names PE 0, which read it
	}
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			panic(p) // no collective frees while a panic unwinds (see above)
		}
		_ = tr.Close()
	}()
	if me == 0 && r.o.languageModel {
		device, devices := jobDevices(c, r.local)
		rep.mfu = newMFU(r.o, m, e, device, devices) // after ddp.New: the model is built
		if br, ok := m.(models.BuildReporter); ok {  // what runs, as the mlp's fused layers say it
			switch line, warn := br.BuildReport(); {
			case line == "":
			case warn:
				log.Warn(fmt.Sprintf("model %s %s", r.o.model, line))
			default:
				log.Info(fmt.Sprintf("model %s: %s", r.o.model, line))
			}
		}
		// the estimate of the precision the model runs in (bf16 plans or fp32 layers)
		rep.activations = activationNote(r.o, m, cfg, rc.Batch/(c.NPEs()*rc.Accum))
	}
	stoppedBy := func() error {
		sig, _ := gotSignal().(syscall.Signal)
		if sig == 0 {
			sig = syscall.SIGINT
		}
		return stoppedError{sig}
	}
	if r.o.evalOnly {
		return r.evaluate(ctx, tr, m, c, e, test, rep, stoppedBy)
	}
	res, err := tr.Fit(ctx, train, test)
	if errors.Is(err, ddp.ErrMismatch) || errors.Is(err, ddp.ErrCorrupt) {
		// a checkpoint of another model or run, or none intact to resume
		// from (a damaged newest one falls back to the one before): the
		// command line or the directory must change (one line, exit 2),
		// and a restart would fail the same way
		if errors.Is(err, ddp.ErrMismatch) {
			from := r.o.resume
			if from == "latest" {
				from = r.o.ckptDir
			}
			err = r.withHidden(err, from)
		}
		return inputErr(err)
	}
	if err != nil && !errors.Is(err, ddp.ErrCheckpointSave) {
		return err
	}
	// a checkpoint that could not be saved leaves the results complete:
	// print them, then fail
	if me == 0 {
		rep.summary(res, c, e)
		if g, ok := m.(models.LanguageModel); ok && r.o.sampleTokens > 0 && !res.Stopped && err == nil {
			if serr := rep.sample(ctx, g, e, tr.Params(), test, r.o.sampleTokens, r.o.seed); serr != nil {
				res.Stopped = true // exit as a stopped run: 130 or 143
			}
		}
	}
	if err != nil {
		return finishedError{err}
	}
	if rep.close(); rep.failed != nil {
		return finishedError{rep.failed}
	}
	if res.Stopped {
		return stoppedBy()
	}
	return nil
}

// evaluate is --eval-only: the loss of the --init-from weights over the
// evaluation set (collective), printed by PE 0 with a language model's
// sample; stoppedBy is the error of a run a signal stopped.
func (r *peRun) evaluate(ctx context.Context, tr *ddp.Trainer, m models.Model, c comm.Comm, e compute.Engine, test datasets.Source,
	rep *reporter, stoppedBy func() error) error {
	if c.MyPE() == 0 {
		rep.evaluating(tr, c, e, test)
	}
	start := time.Now()
	res, err := tr.Evaluate(test)
	if err != nil {
		return err
	}
	if c.MyPE() != 0 {
		return nil
	}
	rep.evaluated(res, time.Since(start))
	stopped := false
	if g, ok := m.(models.LanguageModel); ok && r.o.sampleTokens > 0 {
		stopped = rep.sample(ctx, g, e, tr.Params(), test, r.o.sampleTokens, r.o.seed) != nil
	}
	if rep.close(); rep.failed != nil {
		return finishedError{rep.failed}
	}
	if stopped {
		return stoppedBy()
	}
	return nil
}

// sizeString writes a byte count the way --heap-size takes it.
func sizeString(n int64) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
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

// totalSteps is the number of optimizer steps of the run.
func (r *peRun) totalSteps(n int) int {
	rc := r.o.recipe
	spe := (n + rc.Batch - 1) / rc.Batch
	total := rc.Epochs * spe
	if rc.MaxSteps > 0 && (rc.MaxSteps < total || total == 0) {
		total = rc.MaxSteps
	}
	return total
}

// deviceDataMode reads --data-on-device (checked at start-up).
func deviceDataMode(s string) ddp.DeviceDataMode {
	switch s {
	case "on":
		return ddp.DeviceDataOn
	case "off":
		return ddp.DeviceDataOff
	}
	return ddp.DeviceDataAuto
}

// gradKind is --grad-dtype as ddp.Options.GradDType.
func gradKind(s string) comm.Kind {
	if s == "bf16" {
		return comm.BFloat16
	}
	return comm.Float32
}

// deviceMemoryHint is what to do when the GPU had no room for the run (the
// build or the first step): the activations grow with the rows a PE holds
// at once.
func deviceMemoryHint(o *options) string {
	pes, acc := max(o.pes, 1), max(o.accumulate, 1)
	ctx := ""
	if o.languageModel {
		ctx = ", a shorter --context"
	}
	return fmt.Sprintf("the GPU has no room for this run: each PE holds %d rows at once (--batch-size %d over %d PEs and --accumulate %d); "+
		"a smaller --batch-size, a larger --accumulate (the same global batch in more, smaller micro-batches)%s or fewer PEs on one GPU needs less",
		o.batch/(pes*acc), o.batch, pes, acc, ctx)
}
