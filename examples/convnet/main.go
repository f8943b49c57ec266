// Command convnet trains a small convolutional network, written in this
// package with its own layers, on Fashion-MNIST over several PEs:
//
//	go run ./examples/convnet --pes 4
//	go run ./examples/convnet --pes 4 --dataset synthetic --max-steps 200
//
// It shows the library's whole path for a model it does not ship:
//
//   - conv.go and pool.go implement models.Layer (Conv2D with im2col and the
//     engine's GEMM; 2×2 MaxPool2D), with finite-difference gradient checks
//     in their tests;
//   - model.go composes them with models.NewLinear into models.Sequential
//     and registers the result as "convnet";
//   - main.go starts the PEs with ddp.Launch (it re-executes this program
//     --pes times; under mpirun every process is a PE), then builds a CPU
//     engine, the model, an optimizer, a schedule and the data in each PE
//     and hands them to a ddp.Trainer, with hooks that log and report
//     checkpoints on PE 0.
//
// Without Fashion-MNIST installed (Debian: apt-get install
// dataset-fashion-mnist) it says so and trains on synthetic pictures of
// shapes instead (shapes.go). The layers loop over host memory, so the
// example runs on the CPU engine only.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"time"

	"github.com/spf13/pflag"
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line's settings.
type options struct {
	pes                 int
	dataset, dataDir    string
	trainSize, testSize int
	channels            []int
	epochs, maxSteps    int
	batch               int
	optimizer           string
	lr                  float32
	seed                uint64
	logEvery            int
	ckptDir, resume     string
	ckptEvery           int
	timeout             time.Duration
	checkReplicasEvery  int
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("convnet", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.pes, "pes", 4, "PEs (processes) to start on this host; under mpirun, give its -np")
	fs.StringVar(&o.dataset, "dataset", "fashion-mnist", "fashion-mnist or synthetic (shapes); synthetic is used when Fashion-MNIST is not installed")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory of the Fashion-MNIST IDX files (default: Debian's)")
	fs.IntVar(&o.trainSize, "train-size", 0, "training samples to use (0: all of Fashion-MNIST, 12000 synthetic)")
	fs.IntVar(&o.testSize, "test-size", 0, "test samples to use (0: all of Fashion-MNIST, 2000 synthetic)")
	fs.IntSliceVar(&o.channels, "channels", DefaultChannels, "output channels of the convolution blocks")
	fs.IntVar(&o.epochs, "epochs", 1, "passes over the training set")
	fs.IntVar(&o.maxSteps, "max-steps", 0, "stop after this many steps (0: no limit)")
	fs.IntVar(&o.batch, "batch-size", 64, "global batch, a multiple of --pes")
	fs.StringVar(&o.optimizer, "optimizer", "adam", "adam, adamw or sgd (with momentum 0.9)")
	fs.Float32Var(&o.lr, "lr", 0, "peak learning rate of the cosine schedule (0: 0.005 for adam and adamw, 0.05 for sgd)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the initial parameters and the data order")
	fs.IntVar(&o.logEvery, "log-every", 50, "steps between log lines")
	fs.StringVar(&o.ckptDir, "checkpoint-dir", "", "write checkpoints here")
	fs.IntVar(&o.ckptEvery, "checkpoint-every", 0, "steps between checkpoints (0: at the end only)")
	fs.StringVar(&o.resume, "resume", "", `"latest" or a checkpoint file to resume from`)
	fs.IntVar(&o.checkReplicasEvery, "check-replicas-every", 0, "compare the replicas' parameter hashes every N steps (always at the end)")
	fs.DurationVar(&o.timeout, "timeout", comm.DefaultTimeout, "deadline of every barrier and allreduce")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, c := range o.channels {
		if c < 1 {
			return nil, fmt.Errorf("--channels %v: every block needs at least 1 channel", o.channels)
		}
	}
	switch {
	case o.pes < 1:
		return nil, fmt.Errorf("--pes %d: want at least 1", o.pes)
	case o.batch < 1:
		return nil, fmt.Errorf("--batch-size %d: must be positive", o.batch)
	case o.batch%o.pes != 0:
		return nil, fmt.Errorf("--batch-size %d is not a multiple of --pes %d", o.batch, o.pes)
	case o.epochs < 1:
		return nil, fmt.Errorf("--epochs %d: must be at least 1", o.epochs)
	case o.maxSteps < 0:
		return nil, fmt.Errorf("--max-steps %d: must not be negative (0: no limit)", o.maxSteps)
	case o.logEvery < 0 || o.ckptEvery < 0 || o.checkReplicasEvery < 0:
		return nil, errors.New("--log-every, --checkpoint-every and --check-replicas-every must not be negative")
	case o.dataset != "fashion-mnist" && o.dataset != "synthetic":
		return nil, fmt.Errorf("--dataset %q: want fashion-mnist or synthetic", o.dataset)
	case !(o.lr >= 0) || math.IsInf(float64(o.lr), 1):
		return nil, fmt.Errorf("--lr %g: want a finite number >= 0 (0: the optimizer's default)", o.lr)
	case o.trainSize < 0 || o.testSize < 0:
		return nil, errors.New("--train-size and --test-size must not be negative")
	}
	return o, nil
}

// run is the whole command; it returns the exit status. In the process
// started by hand, ddp.Launch starts the PEs, which run this same function
// and find themselves PEs inside Launch.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "convnet: %v\n", err)
		return 2
	}
	if o.ckptDir != "" && o.resume == "" {
		// refused here, once, before any PE starts (Fit refuses it too, in
		// every PE)
		if err := ddp.CheckFreshCheckpointDir(o.ckptDir); err != nil {
			fmt.Fprintf(stderr, "convnet: --checkpoint-dir %s: %v: pass --resume latest to go on from there, or name another --checkpoint-dir\n", o.ckptDir, err)
			return 2
		}
	}
	job := ddp.Job{PEs: o.pes, Args: args, Timeout: o.timeout, Stdout: stdout, Stderr: stderr}
	err = ddp.Launch(context.Background(), job, func(ctx context.Context, c comm.Comm) error {
		return train(ctx, c, o, stdout, stderr)
	})
	if err != nil {
		fmt.Fprintf(stderr, "convnet: %v\n", err)
		return launch.ExitCode(err)
	}
	return 0
}

// train is one PE's job: everything from the engine to the summary.
func train(ctx context.Context, c comm.Comm, o *options, stdout, stderr io.Writer) error {
	me := c.MyPE()
	say := func(format string, a ...any) { // PE 0 speaks for the job
		if me == 0 {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	// One BLAS thread per core: the PEs of this host share its cores.
	e, err := cpu.New(cpu.Options{Threads: max(1, runtime.NumCPU()/c.NPEs())})
	if err != nil {
		return err
	}
	trainSet, testSet, err := loadData(o, me, stderr)
	if err != nil {
		return err
	}
	m, err := models.New("convnet", models.Config{Input: []int{1, shapeSide, shapeSide}, Classes: trainSet.Classes(), Hidden: o.channels})
	if err != nil {
		return err
	}
	oc, err := optim.DefaultConfig(o.optimizer) // PyTorch's defaults
	if err != nil {
		return err
	}
	lr := o.lr
	if o.optimizer == "sgd" {
		oc.Momentum = 0.9
		lr = cmp.Or(lr, 0.05)
	}
	lr = cmp.Or(lr, 0.005)
	opt, err := optim.New(o.optimizer, oc)
	if err != nil {
		return err
	}
	opts := ddp.Options{
		GlobalBatch:        o.batch,
		Epochs:             o.epochs,
		MaxSteps:           o.maxSteps,
		Seed:               o.seed,
		LogEvery:           o.logEvery,
		CheckReplicasEvery: o.checkReplicasEvery,
		Checkpoint:         ddp.CheckpointOptions{Dir: o.ckptDir, Every: o.ckptEvery, Resume: o.resume},
	}
	total := opts.Steps(trainSet.Len()) // the run's steps, which the cosine ends with
	opts.Schedule, err = optim.NewSchedule("cosine", optim.ScheduleConfig{LR: lr, Warmup: min(50, total/10), Total: total})
	if err != nil {
		return err
	}
	opts.Hooks = ddp.Hooks{
		OnStart: func(s ddp.StartInfo) {
			say("convnet %v: %d parameters, %d PEs (%s, %s), global batch %d, %d steps",
				o.channels, s.Params, s.NPEs, s.Backend, s.Engine, o.batch, s.TotalSteps)
		},
		OnLog: func(l ddp.LogInfo) {
			say("step %5d  epoch %d  loss %.4f  accuracy %6.2f%%  lr %.4f", l.Step, l.Epoch, l.Loss, 100*l.Accuracy, l.LR)
		},
		OnCheckpoint: func(path string, step int) { say("checkpoint at step %d: %s", step, path) },
		// no OnWarning: PE 0 writes warnings to standard error
	}
	t, err := ddp.New(c, e, m, opt, opts)
	if err != nil {
		return err
	}
	res, err := t.Fit(ctx, trainSet, testSet)
	if err != nil {
		return err
	}
	if res.Stopped {
		say("stopped by a signal after step %d", res.Steps)
	}
	say("done: %d steps in %.1fs, %.0f samples/s", res.Steps, res.Elapsed.Seconds(), res.SamplesPerSec)
	if res.Test.Samples > 0 {
		say("test: loss %.4f, accuracy %.2f%% (%d samples)", res.Test.Loss, 100*res.Test.Accuracy, res.Test.Samples)
	}
	say("%s", res.Replicas)
	return t.Close()
}

// loadData returns the training and test sets, standardised: Fashion-MNIST
// when it is installed and asked for, synthetic shapes otherwise.
func loadData(o *options, me int, stderr io.Writer) (train, test *datasets.InMemory, err error) {
	if o.dataset == "fashion-mnist" {
		train, test, err = datasets.Load("fashion-mnist", o.dataDir)
		var missing *datasets.NotInstalledError
		switch {
		case errors.As(err, &missing):
			if me == 0 {
				fmt.Fprintf(stderr, "warning: %v\nwarning: %s\nwarning: training on synthetic shapes instead\n", err, missing.Hint())
			}
		case err != nil:
			return nil, nil, err
		default:
			mean, std, _ := datasets.PixelStats("fashion-mnist")
			train, test = subset(train, o.trainSize), subset(test, o.testSize)
			train.Normalize(mean, std)
			test.Normalize(mean, std)
			return train, test, nil
		}
	}
	nTrain, nTest := o.trainSize, o.testSize
	if nTrain == 0 {
		nTrain = 12000
	}
	if nTest == 0 {
		nTest = 2000
	}
	all, err := Shapes(nTrain+nTest, o.seed)
	if err != nil {
		return nil, nil, err
	}
	train, test = all.Split(nTest)
	mean, std := train.MeanStd()
	all.Normalize(mean, std)
	return train, test, nil
}

// subset is d.Subset(n), or d when n is 0.
func subset(d *datasets.InMemory, n int) *datasets.InMemory {
	if n == 0 {
		return d
	}
	return d.Subset(n)
}
