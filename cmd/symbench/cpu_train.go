package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/internal/floatflag"
)

// The train subcommand: samples/s of the real train command at several PE
// counts, with and without gradient allreduce overlapped with backward, and
// the PEs' memory.

// cpuTrainOpts are the flags of `symbench train`.
type cpuTrainOpts struct {
	pes       []int
	buckets   []string // update modes compared at every PE count > 1: "" is train's default (sharded), a size the replicated update with that --bucket-size
	warmup    int
	steps     int
	reps      int
	batch     int
	perPE     int // --per-pe-batch: each job's global batch is perPE x its PEs (weak scaling); 0: --batch-size for all
	trainBin  string
	dataset   string // fashion-mnist or synthetic, once resolved
	note      string // why the dataset is synthetic
	format    string
	jsonOut   string
	timeout   time.Duration
	quiet     float64
	extraArgs []string
}

// globalBatch is the global batch of a job with pes PEs.
func (o cpuTrainOpts) globalBatch(pes int) int {
	if o.perPE > 0 {
		return o.perPE * pes
	}
	return o.batch
}

// sampleValues is the number of values of a Fashion-MNIST sample, for the
// size of one batch in the memory target.
const sampleValues = 28 * 28

func parseCPUTrainFlags(args []string) (cpuTrainOpts, error) {
	var o cpuTrainOpts
	fs := pflag.NewFlagSet("symbench train", pflag.ContinueOnError)
	fs.IntSliceVar(&o.pes, "pes", []int{1, 2, 4, 8}, "PE counts to measure (1 is run with 1 BLAS thread and with one per core)")
	fs.StringSliceVar(&o.buckets, "buckets", []string{"default", "1MiB", "0", "256KiB"},
		"update modes compared at every PE count above 1: default is train's own (the sharded update, ZeRO-1); a size is the replicated update with that --bucket-size (0: one allreduce after backward)")
	fs.IntVar(&o.warmup, "warmup", 20, "steps before the timed ones (also the logging interval)")
	fs.IntVar(&o.steps, "steps", 200, "timed steps; a multiple of --warmup")
	fs.IntVar(&o.reps, "reps", 3, "runs of every configuration (the median is reported)")
	fs.IntVar(&o.batch, "batch-size", 256, "global batch of every job (strong scaling: the PEs share it)")
	fs.IntVar(&o.perPE, "per-pe-batch", 0, "instead of --batch-size, a batch of this many samples per PE (weak scaling, as each process of a PyTorch DDP job loads its own batch): --pes P trains with a global batch of P times it")
	fs.StringVar(&o.trainBin, "train-bin", "", "train binary to measure (default: go build ./cmd/train into a temporary directory; without Go, the train binary beside symbench)")
	fs.StringVar(&o.dataset, "dataset", "auto", "auto (Fashion-MNIST if installed, else synthetic data of the same shapes), fashion-mnist or synthetic")
	fs.StringVar(&o.format, "format", "text", "table format: text or markdown")
	fs.StringVar(&o.jsonOut, "json", "", "also write the results as JSON to this file")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "deadline of one train run")
	fs.Float64Var(&o.quiet, "quiet", 0.25, "a run is quiet when other processes kept at most this many CPUs busy meanwhile; quiet runs get tables of their own")
	extra := fs.String("train-args", "", "extra arguments for every train run, e.g. \"--hidden 512,512\"")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.extraArgs = strings.Fields(*extra)
	if err := floatflag.CheckFinite(fs); err != nil {
		return o, err
	}
	switch {
	case len(o.pes) == 0:
		return o, errors.New("--pes: no PE counts")
	case o.warmup < 1 || o.steps < 1 || o.steps%o.warmup != 0:
		return o, fmt.Errorf("--warmup %d --steps %d: want positive values, steps a multiple of warmup", o.warmup, o.steps)
	case o.reps < 1:
		return o, fmt.Errorf("--reps %d: want at least 1", o.reps)
	case o.format != "text" && o.format != "markdown":
		return o, fmt.Errorf("--format %q: want text or markdown", o.format)
	case o.quiet < 0:
		return o, fmt.Errorf("--quiet %g: want a number of CPUs, 0 or more", o.quiet)
	}
	if o.perPE < 0 {
		return o, fmt.Errorf("--per-pe-batch %d: want a positive batch per PE (0: --batch-size)", o.perPE)
	}
	for _, n := range o.pes {
		if n < 1 || (o.perPE == 0 && o.batch%n != 0) {
			return o, fmt.Errorf("--pes %d: want a positive divisor of --batch-size %d", n, o.batch)
		}
	}
	for i, b := range o.buckets {
		if b == "default" {
			o.buckets[i] = ""
		}
	}
	switch o.dataset {
	case "auto":
		o.dataset = "fashion-mnist"
		if err := datasets.CheckInstalled("fashion-mnist", ""); err != nil {
			o.dataset, o.note = "synthetic", fmt.Sprintf("Fashion-MNIST is not installed (%v): synthetic data of the same shapes (60000+10000 samples of 784 values, 10 classes)", err)
		}
	case "fashion-mnist", "synthetic":
	default:
		return o, fmt.Errorf("--dataset %q: want auto, fashion-mnist or synthetic", o.dataset)
	}
	return o, nil
}

// jobs lists the configurations: one PE with 1 BLAS thread and with one per
// core (train's default), then every larger PE count with every bucket size.
func (o cpuTrainOpts) jobs() []cpuTrainJob {
	var out []cpuTrainJob
	for _, p := range o.pes {
		if p == 1 {
			out = append(out, cpuTrainJob{PEs: 1, Threads: 1})
			if n := runtime.NumCPU(); n > 1 {
				out = append(out, cpuTrainJob{PEs: 1, Threads: n})
			}
			continue
		}
		for _, b := range o.buckets {
			out = append(out, cpuTrainJob{PEs: p, Bucket: b})
		}
	}
	return out
}

// cpuTrainResult is one configuration over all its runs.
type cpuTrainResult struct {
	Job  cpuTrainJob   `json:"job"`
	Runs []cpuTrainRun `json:"runs"`
}

// median of the runs' samples/s and step times.
func (r cpuTrainResult) median() (samplesPerSec, stepSeconds float64) {
	var a, b []float64
	for _, run := range r.Runs {
		a, b = append(a, run.SamplesPerSec), append(b, run.StepSeconds)
	}
	return median(a), median(b)
}

// memory is the worst PE's memory over all runs: the largest VmHWM, PSS and
// anonymous memory (each may come from a different PE).
func (r cpuTrainResult) memory() peMemory {
	var m peMemory
	for _, run := range r.Runs {
		for _, pm := range run.Memory {
			m.HWM, m.PSS, m.Anon = max(m.HWM, pm.HWM), max(m.PSS, pm.PSS), max(m.Anon, pm.Anon)
			m.RSS, m.File, m.Shmem = max(m.RSS, pm.RSS), max(m.File, pm.File), max(m.Shmem, pm.Shmem)
		}
	}
	return m
}

// cpuTrainReport is the JSON output of `symbench train`.
type cpuTrainReport struct {
	Date     string           `json:"date"`
	Host     string           `json:"host"`
	Dataset  string           `json:"dataset"`
	Note     string           `json:"note,omitempty"`
	Batch    int              `json:"batch"`
	PerPE    int              `json:"per_pe_batch,omitempty"` // weak scaling: Batch is unused
	Warmup   int              `json:"warmup"`
	Steps    int              `json:"steps"`
	Reps     int              `json:"reps"`
	Params   int              `json:"params"`
	Engine   string           `json:"engine"`
	TargetB  int64            `json:"memory_target_bytes"`
	Results  []cpuTrainResult `json:"results"`
	CPUs     int              `json:"cpus"`
	Quiet    float64          `json:"quiet_cpus"` // see --quiet
	Commands []string         `json:"commands"`

	// StartLoad is the 1-minute load average before the first run: above
	// quietLoad no speed verdict is given
	StartLoad float64 `json:"start_load"`
}

func runCPUTrain(args []string) error {
	o, err := parseCPUTrainFlags(args)
	if err != nil {
		return err
	}
	return withTrainBinary(o.trainBin, func(ctx context.Context, bin string) error {
		rep, err := measureCPUTrain(ctx, bin, o, os.Stderr)
		if err != nil {
			return err
		}
		if o.jsonOut != "" {
			b, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
				return err
			}
		}
		return printTrainReport(os.Stdout, o.format, rep)
	})
}

// withTrainBinary runs fn with the train binary to measure (buildTrainBinary)
// and a context that SIGINT or SIGTERM cancels.
func withTrainBinary(path string, fn func(ctx context.Context, bin string) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, cleanup, err := buildTrainBinary(path)
	if err != nil {
		return err
	}
	defer cleanup()
	return fn(ctx, bin)
}

// buildTrainBinary returns the train binary to run: path; else one built
// from this module's cmd/train with go build (run symbench inside the
// module); else, on a host without Go, the train binary beside this one.
func buildTrainBinary(path string) (string, func(), error) {
	if path != "" {
		abs, err := filepath.Abs(path)
		return abs, func() {}, err
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		if self, err := os.Executable(); err == nil {
			if beside := filepath.Join(filepath.Dir(self), "train"); fileExists(beside) {
				fmt.Fprintf(os.Stderr, "symbench train: no go command; measuring %s\n", beside)
				return beside, func() {}, nil
			}
		}
		return "", nil, errors.New("no go command to build cmd/train and no train binary beside symbench: pass --train-bin")
	}
	dir, err := os.MkdirTemp("", "symbench-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	bin := filepath.Join(dir, "train")
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/symddp/symddp/cmd/train")
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go build cmd/train (run symbench inside the symddp module, or pass --train-bin): %v\n%s", err, out)
	}
	return bin, cleanup, nil
}

// measureCPUTrain runs every job o.reps times, the repetitions outermost so that
// a change of the machine's load affects every job alike.
func measureCPUTrain(ctx context.Context, bin string, o cpuTrainOpts, progress io.Writer) (cpuTrainReport, error) {
	rep := cpuTrainReport{Date: time.Now().Format("2006-01-02 15:04 MST"), Host: describeHost(nil), Dataset: o.dataset,
		Note: o.note, Batch: o.batch, PerPE: o.perPE, Warmup: o.warmup, Steps: o.steps, Reps: o.reps, CPUs: runtime.NumCPU(), Quiet: o.quiet, StartLoad: loadAverage()}
	jobs := o.jobs()
	rep.Results = make([]cpuTrainResult, len(jobs))
	for i, j := range jobs {
		rep.Results[i].Job = j
		rep.Commands = append(rep.Commands, cpuTrainCommand(j, o))
	}
	for r := 0; r < o.reps; r++ {
		for i, j := range jobs {
			run, err := runCPUTrainJob(ctx, bin, j, o)
			if err != nil {
				return rep, err
			}
			fmt.Fprintf(progress, "symbench train: rep %d/%d, --pes %s, %s update: %.0f samples/s, step %s, load %.1f, other processes %.2f CPUs\n",
				r+1, o.reps, j.label(), bucketName(j.Bucket), run.SamplesPerSec, formatTime(run.StepSeconds), run.Load, run.OtherCores)
			rep.Results[i].Runs = append(rep.Results[i].Runs, run)
			if rep.Params == 0 {
				rep.Params, rep.Engine = run.Params, run.Engine
			}
		}
	}
	// params, grads and momentum (SGD's one slot) in float32, one global
	// batch of float32 samples, and 64 MiB.
	// With a batch per PE, one batch is what a PE holds.
	rep.TargetB = int64(3*4*rep.Params) + int64(4*o.globalBatch(1)*sampleValues) + 64<<20
	return rep, nil
}

// cpuTrainCommand is the train command a job runs, for the report.
func cpuTrainCommand(j cpuTrainJob, o cpuTrainOpts) string {
	return "train " + strings.Join(trainArgs(j, o, "FILE"), " ")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
