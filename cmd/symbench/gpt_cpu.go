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
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// The gpt-cpu subcommand: tokens/s of the product's `train --model
// gpt-tiny` on this host's CPUs at several PE counts, beside PyTorch's
// DistributedDataParallel training the same model in the same run
// (bench/torch_gpt_cpu_bench.py), with the same batch per PE.

func init() {
	register("gpt-cpu", "tokens/s of train --model gpt-tiny at --pes 1, 2, 4 beside PyTorch DDP (gloo), and memory per PE", runGPTCPU)
}

// gptModel is the model measured; gptContext is its context (tokens per
// sequence), which turns train's samples/s into tokens/s.
const (
	gptModel   = "gpt-tiny"
	gptContext = 128
)

// gptCPUOpts are the flags of `symbench gpt-cpu`.
type gptCPUOpts struct {
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
	fs.IntSliceVar(&o.pes, "pes", []int{1, 2, 4}, "PE counts (and PyTorch rank counts) to measure")
	fs.IntVar(&o.perPE, "per-pe-batch", 8, "sequences of 128 tokens per PE and step (train --batch-size is PEs times this; PyTorch --batch)")
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
	switch o.script {
	case "none":
		o.script = ""
	case "":
		o.script = filepath.Join(moduleRoot(), "bench", "torch_gpt_cpu_bench.py")
		if !fileExists(o.script) {
			return o, fmt.Errorf("no PyTorch peer at %s: run symbench inside the symddp module, or pass --torch-script PATH (or none)", o.script)
		}
	}
	return o, nil
}

// gptTrainArgs are the arguments of the train run at pes PEs, its metrics
// log written to metricsPath. The step is PyTorch's: AdamW without
// gradient clipping, one BLAS thread per PE as the script gives each rank
// one thread; learning-rate warm-up is off so that short runs are allowed
// (it changes no work); validation runs once at the end, on one batch,
// after the timed steps; no sample is generated.
func gptTrainArgs(o gptCPUOpts, pes int, metricsPath string) []string {
	args := []string{"--pes", strconv.Itoa(pes), "--model", gptModel, "--batch-size", strconv.Itoa(o.perPE * pes),
		"--max-steps", strconv.Itoa(o.warmup + o.steps), "--log-every", strconv.Itoa(o.warmup),
		"--optimizer", "adamw", "--clip-norm", "0", "--warmup-steps", "0", "--threads", "1",
		"--eval-every", "0", "--eval-batches", "1", "--sample-tokens", "0", "--corpus-max", o.corpusMax,
		"--no-progress", "--metrics", metricsPath}
	return append(args, o.extraArgs...)
}

// torchArgs are the arguments of the PyTorch script at ranks ranks.
func torchArgs(o gptCPUOpts, ranks int) []string {
	return []string{o.script, "--ranks", strconv.Itoa(ranks), "--batch", strconv.Itoa(o.perPE),
		"--warmup", strconv.Itoa(o.warmup), "--steps", strconv.Itoa(o.steps)}
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
	rep := gptCPUReport{Date: time.Now().Format("2006-01-02 15:04 MST"), Host: describeHost(nil), PerPE: o.perPE,
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
			row.Ours = append(row.Ours, run)
			if rep.Params == 0 {
				rep.Params, rep.Engine = run.Run.Params, run.Run.Engine
			}
			fmt.Fprintf(progress, "symbench gpt-cpu: rep %d/%d, --pes %d: symddp %.0f tokens/s, load %.1f, other processes %.2f CPUs\n",
				r+1, o.reps, p, run.TokensPerSec, run.Run.Load, run.Run.OtherCores)
			if o.script == "" {
				continue
			}
			out, err := runTorchGPT(ctx, o, p)
			if err != nil {
				return rep, err
			}
			lines, version, err := parseTorchGPTOutput(out)
			if err != nil {
				return rep, fmt.Errorf("%s: %w", o.script, err)
			}
			if len(lines) != 1 || lines[0].Ranks != p {
				return rep, fmt.Errorf("%s --ranks %d: want one torch-gpt line with ranks=%d, got %d lines:\n%s", o.script, p, p, len(lines), out)
			}
			t := lines[0]
			if t.Context != gptContext || t.BatchPerRank != o.perPE || t.Steps != o.steps {
				return rep, fmt.Errorf("%s: ran context %d, batch %d, %d steps; asked for %d, %d, %d", o.script, t.Context, t.BatchPerRank, t.Steps, gptContext, o.perPE, o.steps)
			}
			rep.TorchVersion, rep.TorchParams = version, t.Params
			row.Torch = append(row.Torch, t)
			fmt.Fprintf(progress, "symbench gpt-cpu: rep %d/%d, %d ranks: PyTorch %.0f tokens/s\n", r+1, o.reps, p, t.TokensPerSec)
		}
	}
	return rep, nil
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
	if out.TokensPerSec, out.Run.StepSeconds, err = gptTokensPerSec(b, o.warmup, o.warmup+o.steps); err != nil {
		return out, fmt.Errorf("metrics of --pes %d: %w", pes, err)
	}
	out.Run.SamplesPerSec = out.TokensPerSec / gptContext
	return out, nil
}

// gptTokensPerSec is the tokens/s and mean step time between the logs at
// steps from and to of train's metrics log: its samples (sequences) per
// second times the context.
func gptTokensPerSec(metrics []byte, from, to int) (tokensPerSec, stepSeconds float64, err error) {
	sps, step, err := timedWindow(bytes.NewReader(metrics), from, to)
	return sps * gptContext, step, err
}

// runTorchGPT runs the PyTorch script at ranks ranks and returns its stdout.
func runTorchGPT(ctx context.Context, o gptCPUOpts, ranks int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.python, torchArgs(o, ranks)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", o.python, strings.Join(torchArgs(o, ranks), " "), err, tail(stderr.String(), 20))
	}
	return stdout.String(), nil
}
