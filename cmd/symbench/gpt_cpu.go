package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/symddp/symddp/models"
)

// The gpt-cpu subcommand: tokens/s of the product's `train --model
// gpt-tiny` (or llama-tiny) on this host's CPUs at several PE counts,
// beside PyTorch's DistributedDataParallel training the same model in the
// same run (bench/torch_gpt_cpu_bench.py), with the same batch per PE.

func init() {
	register("gpt-cpu", "tokens/s of train --model gpt-tiny (or llama-tiny) at --pes 1, 2, 4 beside PyTorch DDP (gloo), and memory per PE", runGPTCPU)
}

// gptCPUModels are the models the PyTorch peer builds, by train's names.
var gptCPUModels = []string{"gpt-tiny", "llama-tiny"}

// gptCPUOpts are the flags of `symbench gpt-cpu`.
type gptCPUOpts struct {
	model     string
	context   int // the model's context (tokens per sequence): train's samples/s times it are tokens/s
	params    int // the model's parameters by models.New, which train and the peer must both have
	pes       []int
	perPE     int // sequences per PE and step
	warmup    int // untimed steps (also train's logging interval)
	steps     int // timed steps
	reps      int
	trainBin  string
	python    string
	script    string // "" when PyTorch is not measured
	corpusMax string
	format    string
	timeout   time.Duration
	extraArgs []string
}

func parseGPTCPUFlags(args []string) (gptCPUOpts, error) {
	var o gptCPUOpts
	fs := pflag.NewFlagSet("symbench gpt-cpu", pflag.ContinueOnError)
	fs.StringVar(&o.model, "model", "gpt-tiny", "model both sides train: "+strings.Join(gptCPUModels, " or "))
	fs.IntSliceVar(&o.pes, "pes", []int{1, 2, 4}, "PE counts (and PyTorch rank counts) to measure")
	fs.IntVar(&o.perPE, "per-pe-batch", 8, "sequences (of the model's context, 128 tokens) per PE and step (train --batch-size is PEs times this; PyTorch --batch)")
	fs.IntVar(&o.warmup, "warmup", 5, "untimed steps first (also train's --log-every)")
	fs.IntVar(&o.steps, "steps", 20, "timed steps; a multiple of --warmup")
	fs.IntVar(&o.reps, "reps", 1, "runs of every PE count on each side (the median is reported)")
	fs.StringVar(&o.trainBin, "train-bin", "", "train binary to measure (default: go build ./cmd/train into a temporary directory; without Go, the train binary beside symbench)")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "Python with PyTorch (Debian's python3-torch)")
	fs.StringVar(&o.script, "torch-script", "", "PyTorch peer (default: bench/torch_gpt_cpu_bench.py of the module holding the working directory); \"none\": symddp only")
	fs.StringVar(&o.corpusMax, "corpus-max", "16MiB", "train --corpus-max: how much of the text corpus (Go's source tree) train loads")
	fs.StringVar(&o.format, "format", "text", "table format: text or markdown")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "deadline of one train or PyTorch run")
	extra := fs.String("train-args", "", "extra arguments for every train run")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.extraArgs = strings.Fields(*extra)
	switch {
	case len(o.pes) == 0:
		return o, errors.New("--pes: no PE counts")
	case o.perPE < 1:
		return o, fmt.Errorf("--per-pe-batch %d: want at least 1", o.perPE)
	case o.warmup < 1 || o.steps < 1 || o.steps%o.warmup != 0:
		return o, fmt.Errorf("--warmup %d --steps %d: want positive values, steps a multiple of warmup", o.warmup, o.steps)
	case o.reps < 1:
		return o, fmt.Errorf("--reps %d: want at least 1", o.reps)
	case o.format != "text" && o.format != "markdown":
		return o, fmt.Errorf("--format %q: want text or markdown", o.format)
	}
	for _, n := range o.pes {
		if n < 1 {
			return o, fmt.Errorf("--pes %d: want positive PE counts", n)
		}
	}
	var err error
	if o.context, o.params, err = gptCPUModel(o.model); err != nil {
		return o, err
	}
	if o.trainBin != "" && !fileExists(o.trainBin) {
		return o, fmt.Errorf("--train-bin %s: no such file (build it with go build ./cmd/train, or leave the flag out)", o.trainBin)
	}
	switch o.script {
	case "none":
		o.script = ""
	case "":
		o.script = filepath.Join(moduleRoot(), "bench", "torch_gpt_cpu_bench.py")
		if !fileExists(o.script) {
			return o, fmt.Errorf("no PyTorch peer at %s: run symbench inside the symddp module, or pass --torch-script PATH (or none)", o.script)
		}
	default:
		if !fileExists(o.script) {
			return o, fmt.Errorf("--torch-script %s: no such file", o.script)
		}
	}
	if o.script != "" {
		// before train's runs, which take minutes: a Python without torch
		// would fail only after them
		if out, err := exec.Command(o.python, "-c", "import torch").CombinedOutput(); err != nil {
			why := err.Error()
			if last := strings.TrimSpace(tail(string(out), 1)); last != "" {
				why += ": " + last
			}
			return o, fmt.Errorf("--python %s cannot import torch (%s): give a Python with PyTorch (Debian: apt-get install python3-torch), or --torch-script none",
				o.python, why)
		}
	}
	return o, nil
}

// gptCPUModel is the context and parameter count of a model the peer builds.
func gptCPUModel(name string) (context, params int, err error) {
	if !slices.Contains(gptCPUModels, name) {
		return 0, 0, fmt.Errorf("--model %q: want %s (the models the PyTorch peer builds)", name, strings.Join(gptCPUModels, " or "))
	}
	m, err := models.New(name, models.Config{})
	if err != nil {
		return 0, 0, fmt.Errorf("--model %s: %w", name, err)
	}
	for _, s := range m.Params() {
		params += s.Size()
	}
	return m.Data().Input[0], params, nil
}

// gptTrainArgs are the arguments of the train run at pes PEs, its metrics
// log written to metricsPath. The step is PyTorch's: AdamW without
// gradient clipping, one BLAS thread per PE as the script gives each rank
// one thread; learning-rate warm-up is off so that short runs are allowed
// (it changes no work); validation runs once at the end, on one batch,
// after the timed steps; no sample is generated.
func gptTrainArgs(o gptCPUOpts, pes int, metricsPath string) []string {
	args := []string{"--pes", strconv.Itoa(pes), "--model", o.model, "--batch-size", strconv.Itoa(o.perPE * pes),
		"--max-steps", strconv.Itoa(o.warmup + o.steps), "--log-every", strconv.Itoa(o.warmup),
		"--optimizer", "adamw", "--clip-norm", "0", "--warmup-steps", "0", "--threads", "1",
		"--eval-every", "0", "--eval-batches", "1", "--sample-tokens", "0", "--corpus-max", o.corpusMax,
		"--no-progress", "--metrics", metricsPath}
	return append(args, o.extraArgs...)
}

// torchArgs are the arguments of the PyTorch script at ranks ranks; it
// exits before training when its model has not symddp's parameter count.
func torchArgs(o gptCPUOpts, ranks int) []string {
	return []string{o.script, "--model", o.model, "--ranks", strconv.Itoa(ranks), "--batch", strconv.Itoa(o.perPE),
		"--warmup", strconv.Itoa(o.warmup), "--steps", strconv.Itoa(o.steps), "--expect-params", strconv.Itoa(o.params)}
}

func runGPTCPU(args []string) error {
	o, err := parseGPTCPUFlags(args)
	if err != nil {
		return err
	}
	return withTrainBinary(o.trainBin, func(ctx context.Context, bin string) error {
		rep, err := measureGPTCPU(ctx, bin, o, os.Stderr)
		if err != nil {
			return err
		}
		return printGPTCPUReport(os.Stdout, o.format, rep)
	})
}

// measureGPTCPU runs train and the PyTorch script at every PE count, o.reps
// times, the repetitions outermost and the two sides in turns, so that a
// change of the machine's load affects both alike.
func measureGPTCPU(ctx context.Context, bin string, o gptCPUOpts, progress io.Writer) (gptCPUReport, error) {
	rep := gptCPUReport{Date: time.Now().Format("2006-01-02 15:04 MST"), Host: describeHost(nil), Model: o.model, Context: o.context, PerPE: o.perPE,
		Warmup: o.warmup, Steps: o.steps, Reps: o.reps, CPUs: runtime.NumCPU(), Torch: o.script != "", StartLoad: loadAverage()}
	rep.Rows = make([]gptCPURow, len(o.pes))
	for i, p := range o.pes {
		rep.Rows[i].PEs = p
		rep.Commands = append(rep.Commands, "train "+strings.Join(gptTrainArgs(o, p, "FILE"), " "))
		if o.script != "" {
			rep.Commands = append(rep.Commands, o.python+" "+strings.Join(torchArgs(o, p), " "))
		}
	}
	for r := 0; r < o.reps; r++ {
		for i, p := range o.pes {
			row := &rep.Rows[i]
			run, err := runGPTTrain(ctx, bin, o, p)
			if err != nil {
				return rep, err
			}
			if run.Run.Params != o.params {
				return rep, fmt.Errorf("train --model %s --pes %d: %d parameters, symbench's models.New(%q) has %d: not the model measured (a train of another version? --train-bin)",
					o.model, p, run.Run.Params, o.model, o.params)
			}
			row.Ours = append(row.Ours, run)
			if rep.Params == 0 {
				rep.Params, rep.Engine = run.Run.Params, run.Run.Engine
			}
			fmt.Fprintf(progress, "symbench gpt-cpu: rep %d/%d, --pes %d: symddp %.0f tokens/s, load %.1f, other processes %.2f CPUs\n",
				r+1, o.reps, p, run.TokensPerSec, run.Run.Load, run.Run.OtherCores)
			if o.script == "" {
				continue
			}
			out, other, err := runTorchGPT(ctx, o, p)
			if err != nil {
				return rep, err
			}
			t, version, err := checkTorchGPTOutput(o, p, run.Run.Params, out)
			if err != nil {
				return rep, err
			}
			rep.TorchVersion, rep.TorchParams = version, t.Params
			row.Torch, row.TorchOther = append(row.Torch, t), append(row.TorchOther, other)
			fmt.Fprintf(progress, "symbench gpt-cpu: rep %d/%d, %d ranks: PyTorch %.0f tokens/s, other processes %.2f CPUs\n", r+1, o.reps, p, t.TokensPerSec, other)
		}
	}
	return rep, nil
}

// checkTorchGPTOutput reads the PyTorch script's output of a run at ranks
// ranks and checks that it ran what was asked: one line, of o's model,
// context, batch and steps, with the parameter count of train's run.
func checkTorchGPTOutput(o gptCPUOpts, ranks, trainParams int, out string) (torchGPTLine, string, error) {
	lines, version, err := parseTorchGPTOutput(out)
	if err != nil {
		return torchGPTLine{}, version, fmt.Errorf("%s: %w", o.script, err)
	}
	if len(lines) != 1 || lines[0].Ranks != ranks {
		return torchGPTLine{}, version, fmt.Errorf("%s --ranks %d: want one torch-gpt line with ranks=%d, got %d lines:\n%s", o.script, ranks, ranks, len(lines), out)
	}
	t := lines[0]
	if t.Model != o.model || t.Context != o.context || t.BatchPerRank != o.perPE || t.Steps != o.steps {
		return t, version, fmt.Errorf("%s: ran %s, context %d, batch %d, %d steps; asked for %s, %d, %d, %d",
			o.script, t.Model, t.Context, t.BatchPerRank, t.Steps, o.model, o.context, o.perPE, o.steps)
	}
	if t.Params != trainParams {
		return t, version, fmt.Errorf("%s: PyTorch's %s has %d parameters, train's %d: not the same model", o.script, o.model, t.Params, trainParams)
	}
	return t, version, nil
}

// runGPTTrain runs train once at pes PEs and reads its tokens/s over the
// timed steps from the metrics log.
func runGPTTrain(ctx context.Context, bin string, o gptCPUOpts, pes int) (gptTrainRun, error) {
	dir, err := os.MkdirTemp("", "symbench-gpt-")
	if err != nil {
		return gptTrainRun{}, err
	}
	defer os.RemoveAll(dir)
	metrics := filepath.Join(dir, "metrics.jsonl")
	run, stderr, err := runTrainProcess(ctx, bin, dir, gptTrainArgs(o, pes, metrics), o.timeout)
	out := gptTrainRun{Run: run, Sharded: strings.Contains(stderr, "optimizer sharded over the PEs")}
	if err != nil {
		return out, err
	}
	b, err := os.ReadFile(metrics)
	if err != nil {
		return out, fmt.Errorf("metrics of --pes %d: %w", pes, err)
	}
	if out.TokensPerSec, out.Run.StepSeconds, err = gptTokensPerSec(b, o.context, o.warmup, o.warmup+o.steps); err != nil {
		return out, fmt.Errorf("metrics of --pes %d: %w", pes, err)
	}
	out.Run.SamplesPerSec = out.TokensPerSec / float64(o.context)
	return out, nil
}

// gptTokensPerSec is the tokens/s and mean step time between the logs at
// steps from and to of train's metrics log: its samples (sequences) per
// second times the context.
func gptTokensPerSec(metrics []byte, context, from, to int) (tokensPerSec, stepSeconds float64, err error) {
	sps, step, err := timedWindow(bytes.NewReader(metrics), from, to)
	return sps * float64(context), step, err
}

// runTorchGPT runs the PyTorch script at ranks ranks and returns its stdout
// and the CPUs that other processes kept busy meanwhile (on average; the
// script's time includes its ranks', which it waits for), as
// runTrainProcess measures them around train.
func runTorchGPT(ctx context.Context, o gptCPUOpts, ranks int) (string, float64, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.python, torchArgs(o, ranks)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	work := startHostWork()
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("%s %s: %v\n%s", o.python, strings.Join(torchArgs(o, ranks), " "), err, tail(stderr.String(), 20))
	}
	own := 0.0
	if u, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		own = tvSeconds(u.Utime) + tvSeconds(u.Stime)
	}
	other, _ := work.otherCPUs(own, time.Since(t0).Seconds())
	return stdout.String(), other, nil
}
