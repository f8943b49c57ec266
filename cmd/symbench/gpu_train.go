package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/internal/cudalib"
)

// The gpu-train subcommand: samples per second of the mlp's training step
// on the CUDA engine at one PE, eager and replayed from a CUDA graph, as
// the product runs it: the train command on the nvshmem backend (ddp's
// step, the batch copied to the GPU from the host every step), its speed
// read from train's metrics log after the warm-up steps.
func init() {
	register("gpu-train", "MLP training samples/s of train --backend nvshmem, eager and CUDA graph (needs libsymddp_cuda.so and a GPU)", runGPUTrain)
}

// trainConfig is one measured MLP and batch.
type trainConfig struct {
	hidden []int
	batch  int
}

func (c trainConfig) name() string {
	parts := []string{"784"}
	for _, h := range c.hidden {
		parts = append(parts, strconv.Itoa(h))
	}
	return strings.Join(append(parts, "10"), "-")
}

// flops is the arithmetic of one step's GEMMs: forward x·Wᵀ and the
// weight gradients for every layer, input gradients for all but the first.
func (c trainConfig) flops() float64 {
	dims := append(append([]int{784}, c.hidden...), 10)
	var all, first float64
	for i := 0; i+1 < len(dims); i++ {
		all += float64(dims[i] * dims[i+1])
	}
	first = float64(dims[0] * dims[1])
	return 2 * float64(c.batch) * (3*all - first)
}

// defaultTrainConfigs are the four: 784-256-256-10 at batch 256 and
// 4096, 784-1024x4-10 at 1024, 784-4096x4-10 at 4096.
var defaultTrainConfigs = []string{"256x2/256", "256x2/4096", "1024x4/1024", "4096x4/4096"}

// parseTrainConfig reads WIDTHxLAYERS/BATCH.
func parseTrainConfig(s string) (trainConfig, error) {
	var w, l, b int
	if _, err := fmt.Sscanf(s, "%dx%d/%d", &w, &l, &b); err != nil || w < 1 || l < 1 || b < 1 {
		return trainConfig{}, fmt.Errorf("config %q: want WIDTHxLAYERS/BATCH, e.g. 256x2/4096", s)
	}
	c := trainConfig{batch: b}
	for i := 0; i < l; i++ {
		c.hidden = append(c.hidden, w)
	}
	return c, nil
}

type gpuTrainOpts struct {
	configs  []trainConfig
	modes    []string
	warmup   int // untimed steps (also train's --log-every)
	steps    int // timed steps
	lib      string
	device   int
	dataset  string
	trainBin string
	timeout  time.Duration
	// train runs one train command and returns its stderr and metrics log
	// (tests: a recorded one).
	train func(ctx context.Context, args []string) (stderr string, metrics []byte, err error)
}

func parseGPUTrainFlags(args []string) (gpuTrainOpts, error) {
	var o gpuTrainOpts
	fs := pflag.NewFlagSet("symbench gpu-train", pflag.ContinueOnError)
	cfgs := fs.StringSlice("configs", defaultTrainConfigs, "MLPs and batches as WIDTHxLAYERS/BATCH (hidden layers of WIDTH between 784 inputs and 10 classes)")
	fs.StringSliceVar(&o.modes, "modes", []string{"eager", "graph"}, "eager: train --cuda-graph=false, kernels launched one by one; graph: train's default, the step replayed from a CUDA graph")
	fs.IntVar(&o.warmup, "warmup", 200, "steps before the timed ones (also train's --log-every)")
	fs.IntVar(&o.steps, "steps", 2000, "timed steps; a multiple of --warmup")
	fs.StringVar(&o.lib, "lib", "", "path of libsymddp_cuda.so, train's --gpu-lib (default: $SYMDDP_CUDA_LIB, next to symbench, ./build of the directory it runs in or above, up to the module root)")
	fs.IntVar(&o.device, "device", -1, "GPU to use, through CUDA_VISIBLE_DEVICES (-1: GPU 0 of the visible ones)")
	fs.StringVar(&o.dataset, "dataset", "synthetic", "train --dataset: synthetic (Fashion-MNIST's shapes) or fashion-mnist")
	fs.StringVar(&o.trainBin, "train-bin", "", "train binary to run (default: go build ./cmd/train into a temporary directory; without Go, the train binary beside symbench)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "deadline of one train run")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, s := range *cfgs {
		c, err := parseTrainConfig(s)
		if err != nil {
			return o, err
		}
		o.configs = append(o.configs, c)
	}
	for _, m := range o.modes {
		if m != "eager" && m != "graph" {
			return o, fmt.Errorf("--modes: %q, want eager or graph", m)
		}
	}
	if o.warmup < 1 || o.steps < 1 || o.steps%o.warmup != 0 {
		return o, fmt.Errorf("--warmup %d --steps %d: want positive values, steps a multiple of warmup", o.warmup, o.steps)
	}
	o.lib = cudaLibFor(o.lib)
	return o, nil
}

// cudaLibFor is --lib, or where symbench finds libsymddp_cuda.so by train's
// rules from its own directory ($SYMDDP_CUDA_LIB, next to the binary,
// ./build up to the module's root), as an absolute path: train runs in a
// directory of its own, where ./build is not symbench's. "" when none is
// found (train then looks, and says where).
func cudaLibFor(lib string) string {
	if lib != "" {
		return lib
	}
	for _, p := range cudalib.Candidates("") {
		if fileExists(p) {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
			return p
		}
	}
	return ""
}

// gpuTrainArgs are the arguments of the train run of configuration c in
// mode ("eager" or "graph"), its metrics log written to metricsPath: one PE
// on the nvshmem backend, SGD with momentum 0.9 at a constant learning
// rate, no evaluation until the end (and then of one batch).
func gpuTrainArgs(o gpuTrainOpts, c trainConfig, mode, metricsPath string) []string {
	hidden := make([]string, len(c.hidden))
	for i, h := range c.hidden {
		hidden[i] = strconv.Itoa(h)
	}
	args := []string{"--backend", "nvshmem", "--pes", "1", "--model", "mlp", "--hidden", strings.Join(hidden, ","),
		"--batch-size", strconv.Itoa(c.batch), "--dataset", o.dataset,
		"--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.01", "--schedule", "constant",
		"--max-steps", strconv.Itoa(o.warmup + o.steps), "--epochs", "1000000", "--log-every", strconv.Itoa(o.warmup),
		"--eval-every", "0", "--eval-batches", "1", "--no-progress", "--metrics", metricsPath,
		"--cuda-graph=" + strconv.FormatBool(mode == "graph")}
	if o.lib != "" {
		args = append(args, "--gpu-lib", o.lib)
	}
	return args
}

func runGPUTrain(args []string) error {
	o, err := parseGPUTrainFlags(args)
	if err != nil {
		return err
	}
	return withTrainBinary(o.trainBin, func(ctx context.Context, bin string) error {
		o.train = func(ctx context.Context, args []string) (string, []byte, error) {
			return runTrainForMetrics(ctx, bin, args, o.device, o.timeout)
		}
		return gpuTrain(ctx, o, os.Stdout)
	})
}

// runTrainForMetrics runs the train binary with args (whose --metrics the
// caller points at metricsFile in a temporary directory: the placeholder
// is replaced here) and returns its stderr and its metrics log.
func runTrainForMetrics(ctx context.Context, bin string, args []string, device int, timeout time.Duration) (string, []byte, error) {
	dir, err := os.MkdirTemp("", "symbench-gpu-train-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	metrics := filepath.Join(dir, "metrics.jsonl")
	args = append([]string(nil), args...)
	for i := range args {
		if args[i] == metricsFile {
			args[i] = metrics
		}
	}
	var env []string
	if device >= 0 {
		env = append(env, "CUDA_VISIBLE_DEVICES="+strconv.Itoa(device)) // the launcher's PE inherits it
	}
	_, stderr, err := runTrainProcess(ctx, bin, dir, args, timeout, env...)
	if err != nil {
		return stderr, nil, err
	}
	b, err := os.ReadFile(metrics)
	return stderr, b, err
}

// metricsFile stands for the metrics log in the arguments given to
// gpuTrainOpts.train.
const metricsFile = "METRICS"

// trainResult is one configuration's measurements (samples/s by mode).
type trainResult struct {
	cfg    trainConfig
	rate   map[string]float64
	step   map[string]time.Duration
	loss   float64
	gpu    string
	fusion string // how the model's Linear layers ran (train's "model mlp: ..." notice)
	error  error
}

func gpuTrain(ctx context.Context, o gpuTrainOpts, w io.Writer) error {
	fmt.Fprintln(w, "gpu-train: MLP training step of train --backend nvshmem --pes 1 (ddp's step: the batch copied to the GPU,")
	fmt.Fprintln(w, "forward, softmax cross-entropy, backward, SGD momentum 0.9 with the non-finite check; no allreduce at one PE),")
	fmt.Fprintln(w, "fp32 GEMMs without TF32 (Linear layers fused into cuBLASLt epilogues unless "+cuda.FusedEnv+"=0; FUSION lines say per layer),")
	fmt.Fprintf(w, "%s data; %d warm-up steps, then %d timed, from train's metrics log\n", o.dataset, o.warmup, o.steps)
	var results []trainResult
	for _, c := range o.configs {
		r := benchTrain(ctx, o, c)
		results = append(results, r)
		if r.error != nil {
			fmt.Fprintf(w, "%s batch %d: %v\n", c.name(), c.batch, r.error)
		}
	}
	for _, r := range results {
		if r.gpu != "" {
			fmt.Fprintf(w, "GPU: %s\n", r.gpu)
			break
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tbatch\teager samples/s\tgraph samples/s\tgraph step\tGEMM TFLOP/s\tloss\t")
	for _, r := range results {
		if r.error != nil {
			continue
		}
		best := r.step["graph"]
		if best == 0 {
			best = r.step["eager"]
		}
		tf := "-"
		if best > 0 {
			tf = fmt.Sprintf("%.1f", r.cfg.flops()/best.Seconds()/1e12)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.4f\t\n", r.cfg.name(), r.cfg.batch, rateCell(r.rate, "eager"),
			rateCell(r.rate, "graph"), stepCell(r.step["graph"]), tf, r.loss)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var failed error
	for _, r := range results {
		if r.error != nil {
			failed = errors.Join(failed, fmt.Errorf("%s batch %d: %w", r.cfg.name(), r.cfg.batch, r.error))
			continue
		}
		// One machine-readable line per configuration, for scripts.
		fmt.Fprintf(w, "RESULT symddp model=%s batch=%d eager=%.0f graph=%.0f\n", r.cfg.name(), r.cfg.batch, r.rate["eager"], r.rate["graph"])
	}
	for _, r := range results {
		if r.error == nil && r.fusion != "" {
			fmt.Fprintf(w, "FUSION model=%s batch=%d: %s\n", r.cfg.name(), r.cfg.batch, r.fusion)
		}
	}
	return failed
}

func rateCell(m map[string]float64, k string) string {
	if v, ok := m[k]; ok && v > 0 {
		return fmt.Sprintf("%.0f", v)
	}
	return "-"
}

func stepCell(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f us", float64(d.Nanoseconds())/1e3)
}

// benchTrain runs train for one configuration in every mode.
func benchTrain(ctx context.Context, o gpuTrainOpts, c trainConfig) trainResult {
	res := trainResult{cfg: c, rate: map[string]float64{}, step: map[string]time.Duration{}}
	for _, mode := range o.modes {
		stderr, metrics, err := o.train(ctx, gpuTrainArgs(o, c, mode, metricsFile))
		if err == nil {
			var sps, step float64
			sps, step, err = timedWindow(strings.NewReader(string(metrics)), o.warmup, o.warmup+o.steps)
			if err == nil {
				res.rate[mode], res.step[mode] = sps, time.Duration(step*float64(time.Second))
				res.loss, err = lastLoss(metrics, o.warmup+o.steps)
			}
		}
		if g, f := trainNotices(stderr); g != "" || f != "" {
			res.gpu, res.fusion = cmpOr(res.gpu, g), cmpOr(res.fusion, f)
		}
		if err != nil {
			res.error = fmt.Errorf("%s: %w", mode, err)
			return res
		}
	}
	return res
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// lastLoss is the training loss logged at step of a metrics log.
func lastLoss(metrics []byte, step int) (float64, error) {
	var loss *float64
	for _, line := range strings.Split(strings.TrimSpace(string(metrics)), "\n") {
		var m struct {
			Step  int      `json:"step"`
			Loss  *float64 `json:"loss"`
			Final bool     `json:"final"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return 0, fmt.Errorf("bad metrics line %q: %w", line, err)
		}
		if m.Step == step && !m.Final && m.Loss != nil {
			loss = m.Loss
		}
	}
	if loss == nil {
		return 0, fmt.Errorf("no training loss at step %d in the metrics log", step)
	}
	return *loss, nil
}

// engineLine and fusionLine match PE 0's log lines on train's stderr (with
// the launcher's "[pe 0] " prefix when there is one): the CUDA engine's
// `msg="compute engine" engine=cuda gpu="..."` and the model's
// `msg="model mlp: fc1 fused: ...; fc2 ..."`.
var (
	engineLine = regexp.MustCompile(`(?m)^(?:\[pe 0\] )?msg="compute engine" .*\bgpu=("(?:[^"\\]|\\.)*"|\S+)`)
	fusionLine = regexp.MustCompile(`(?m)^(?:\[pe 0\] )?msg=("model \S+: (?:[^"\\]|\\.)*")`)
)

// trainNotices reads the GPU's description and the model's fusion notice
// from train's stderr ("" for what is missing).
func trainNotices(stderr string) (gpu, fusion string) {
	unquote := func(s string) string {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
		return s
	}
	if m := engineLine.FindStringSubmatch(stderr); m != nil {
		gpu = unquote(m[1])
	}
	if m := fusionLine.FindStringSubmatch(stderr); m != nil {
		_, fusion, _ = strings.Cut(unquote(m[1]), ": ")
	}
	return gpu, fusion
}
