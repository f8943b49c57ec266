// Command customdata trains the library's MLP on a dataset of its own: points
// on interleaved spiral arms (spirals.go), a type that implements
// datasets.Dataset in a few lines. The PEs are started by ddp.Launch:
//
//	go run ./examples/customdata --pes 2
//	go run ./examples/customdata --pes 4 --arms 5 --hidden 128,128
//
// Every PE builds the same data from the same seed; the trainer gives each
// PE its own shard of every global batch.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

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
	pes, arms           int
	trainSize, testSize int
	noise               float64
	hidden              []int
	epochs, batch       int
	lr                  float32
	seed                uint64
	logEvery            int
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("customdata", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.pes, "pes", 2, "PEs (processes) to start on this host; under mpirun, give its -np")
	fs.IntVar(&o.arms, "arms", 3, "spiral arms, one class each")
	fs.IntVar(&o.trainSize, "train-size", 3000, "training points")
	fs.IntVar(&o.testSize, "test-size", 1000, "test points")
	fs.Float64Var(&o.noise, "noise", 0.02, "standard deviation of the noise on each coordinate")
	fs.IntSliceVar(&o.hidden, "hidden", []int{64, 64}, "widths of the MLP's hidden layers")
	fs.IntVar(&o.epochs, "epochs", 20, "passes over the training set")
	fs.IntVar(&o.batch, "batch-size", 64, "global batch, a multiple of --pes")
	fs.Float32Var(&o.lr, "lr", 0.01, "peak learning rate of Adam (cosine schedule)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the data, the initial parameters and the data order")
	fs.IntVar(&o.logEvery, "log-every", 100, "steps between log lines")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, w := range o.hidden {
		if w < 1 {
			return nil, fmt.Errorf("--hidden %v: every width must be at least 1", o.hidden)
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
	case !(o.lr >= 0) || math.IsInf(float64(o.lr), 1):
		return nil, fmt.Errorf("--lr %g: want a finite number >= 0", o.lr)
	case o.logEvery < 0:
		return nil, fmt.Errorf("--log-every %d: must not be negative", o.logEvery)
	case o.arms < 2:
		return nil, fmt.Errorf("--arms %d: want at least two (one class each)", o.arms)
	case o.trainSize < 1:
		return nil, fmt.Errorf("--train-size %d: want at least one point", o.trainSize)
	case o.testSize < 1:
		return nil, fmt.Errorf("--test-size %d: want at least one point", o.testSize)
	case !(o.noise >= 0) || math.IsInf(o.noise, 1):
		return nil, fmt.Errorf("--noise %g: want a finite standard deviation >= 0", o.noise)
	}
	return o, nil
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "customdata: %v\n", err)
		return 2
	}
	job := ddp.Job{PEs: o.pes, Args: args, Stdout: stdout, Stderr: stderr}
	err = ddp.Launch(context.Background(), job, func(ctx context.Context, c comm.Comm) error {
		return train(ctx, c, o, stdout)
	})
	if err != nil {
		fmt.Fprintf(stderr, "customdata: %v\n", err)
		return launch.ExitCode(err)
	}
	return 0
}

// train is one PE's job.
func train(ctx context.Context, c comm.Comm, o *options, stdout io.Writer) error {
	say := func(format string, a ...any) {
		if c.MyPE() == 0 {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	trainSet, err := NewSpirals(o.trainSize, o.arms, o.noise, o.seed)
	if err != nil {
		return err
	}
	testSet, err := NewSpirals(o.testSize, o.arms, o.noise, o.seed+1) // other points of the same arms
	if err != nil {
		return err
	}
	e, err := cpu.New(cpu.Options{Threads: 1}) // tiny matrices: one thread each
	if err != nil {
		return err
	}
	m, err := models.New("mlp", models.Config{Input: trainSet.SampleShape(), Classes: trainSet.Classes(), Hidden: o.hidden})
	if err != nil {
		return err
	}
	opt, err := optim.New("adam", optim.Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	if err != nil {
		return err
	}
	opts := ddp.Options{
		GlobalBatch: o.batch,
		Epochs:      o.epochs,
		Seed:        o.seed,
		LogEvery:    o.logEvery,
	}
	// the cosine ends with the run: Steps counts the run's steps
	opts.Schedule, err = optim.NewSchedule("cosine", optim.ScheduleConfig{LR: o.lr, Total: opts.Steps(trainSet.Len())})
	if err != nil {
		return err
	}
	opts.Hooks = ddp.Hooks{
		OnStart: func(s ddp.StartInfo) {
			say("mlp %v on %d spiral arms: %d parameters, %d PEs, %d steps", o.hidden, o.arms, s.Params, s.NPEs, s.TotalSteps)
		},
		OnLog: func(l ddp.LogInfo) {
			say("step %5d  loss %.4f  accuracy %6.2f%%", l.Step, l.Loss, 100*l.Accuracy)
		},
	}
	t, err := ddp.New(c, e, m, opt, opts)
	if err != nil {
		return err
	}
	res, err := t.Fit(ctx, datasets.AsSource(trainSet), datasets.AsSource(testSet))
	if err != nil {
		return err
	}
	say("test: loss %.4f, accuracy %.2f%% (%d points, chance %.2f%%)", res.Test.Loss, 100*res.Test.Accuracy, res.Test.Samples, 100/float64(o.arms))
	say("%s", res.Replicas)
	return t.Close()
}
