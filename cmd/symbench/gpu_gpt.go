package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// The gpu-gpt subcommand: tokens/s and MFU of a language model's training
// (the GPT-2 sizes and the Llama presets) as the product runs it on one
// GPU, `train --backend nvshmem --pes 1 --dataset synthetic` (ddp's step:
// the batch copied to the GPU every step, the model's per-layer forward and
// backward, AdamW), read from train's metrics log after the warm-up steps,
// beside PyTorch's step on the same shapes, eager and torch.compile
// (bench/torch_gpt_bench.py or bench/torch_llama_bench.py: bf16 autocast,
// fused AdamW, the batch resident on the GPU).
func init() {
	register("gpu-gpt", "GPT-2 and Llama tokens/s and MFU of train --backend nvshmem --pes 1 beside PyTorch eager and torch.compile (needs libsymddp_cuda.so and a GPU)", runGPUGPT)
}

// gptPreset is a model shape that both sides have: train's flags for it
// and the PyTorch script's preset of the same shape.
type gptPreset struct {
	label   string   // the table's model column
	torch   string   // the script's --preset
	args    []string // train's model flags
	context int      // T, which turns sequences/s into tokens/s
	script  string   // the PyTorch peer in bench/: torch_gpt_bench.py, or torch_llama_bench.py
}

const (
	torchGPTScript   = "torch_gpt_bench.py"
	torchLlamaScript = "torch_llama_bench.py"
)

// gptPresets are the torch scripts' presets: GPT-2 124M (vocabulary 50304)
// and the larger GPT-2 sizes by train's names (medium 350M, large 774M, xl
// 1.5B), gpt-tiny (4 layers, 4 heads, 128 wide, T 128, bytes), a 6-layer
// 384-wide byte model with T 256, and train's Llama presets (llama-tiny,
// llama-124m: GPT-2 124M's sizes with 4 key/value heads; llama3-1b: Llama
// 3.2 1B's shape, T 2048).
var gptPresets = map[string]gptPreset{
	"gpt2":       {label: "gpt2 124M", torch: "gpt2", args: []string{"--model", "gpt2"}, context: 1024, script: torchGPTScript},
	"medium":     {label: "gpt2-medium", torch: "medium", args: []string{"--model", "gpt2-medium"}, context: 1024, script: torchGPTScript},
	"large":      {label: "gpt2-large", torch: "large", args: []string{"--model", "gpt2-large"}, context: 1024, script: torchGPTScript},
	"xl":         {label: "gpt2-xl", torch: "xl", args: []string{"--model", "gpt2-xl"}, context: 1024, script: torchGPTScript},
	"tiny":       {label: "gpt-tiny", torch: "tiny", args: []string{"--model", "gpt-tiny"}, context: 128, script: torchGPTScript},
	"small":      {label: "gpt 6x384", torch: "small", args: []string{"--model", "gpt", "--layers", "6", "--heads", "6", "--width", "384", "--context", "256"}, context: 256, script: torchGPTScript},
	"llama-tiny": {label: "llama-tiny", torch: "tiny", args: []string{"--model", "llama-tiny"}, context: 128, script: torchLlamaScript},
	"llama-124m": {label: "llama-124m", torch: "llama-124m", args: []string{"--model", "llama-124m"}, context: 1024, script: torchLlamaScript},
	"llama3-1b":  {label: "llama3-1b", torch: "llama3-1b", args: []string{"--model", "llama3-1b"}, context: 2048, script: torchLlamaScript},
}

// gptGPUConfig is one measured model and batch.
type gptGPUConfig struct {
	preset string // a key of gptPresets
	batch  int    // with fit: the batch that fitted, once measured
	fit    bool   // PRESET/max: each side at the largest of fitBatches that fits
}

// fitBatches are the batches a PRESET/max configuration tries, largest
// first, on both sides (the torch scripts' --fit search).
var fitBatches = []int{32, 24, 16, 12, 8, 4, 2, 1}

func (c gptGPUConfig) model() gptPreset { return gptPresets[c.preset] }

// defaultGPTGPUConfigs: GPT-2 124M at the batches PyTorch's numbers were
// taken at, and the two byte models at the torch script's batch.
var defaultGPTGPUConfigs = []string{"gpt2/16", "gpt2/32", "tiny/64", "small/64"}

// parseGPTGPUConfig reads PRESET/BATCH or PRESET/max (gpt-tiny is tiny's
// other name, and train's gpt2-medium, gpt2-large and gpt2-xl are medium's,
// large's and xl's).
func parseGPTGPUConfig(s string) (gptGPUConfig, error) {
	name, b, ok := strings.Cut(s, "/")
	if name == "gpt-tiny" {
		name = "tiny"
	}
	name = strings.TrimPrefix(name, "gpt2-")
	if p, known := gptPresets[name]; ok && known && b == "max" {
		if p.script != torchLlamaScript {
			return gptGPUConfig{}, fmt.Errorf("config %q: PRESET/max takes the llama presets (torch_gpt_bench.py has no --fit search); give the GPT a batch", s)
		}
		return gptGPUConfig{preset: name, fit: true}, nil
	}
	batch, err := strconv.Atoi(b)
	if _, known := gptPresets[name]; !ok || !known || err != nil || batch < 1 {
		return gptGPUConfig{}, fmt.Errorf("config %q: want PRESET/BATCH or PRESET/max with PRESET gpt2, medium, large, xl, tiny, small, llama-tiny, llama-124m or llama3-1b, e.g. gpt2/16", s)
	}
	return gptGPUConfig{preset: name, batch: batch}, nil
}

type gpuGPTOpts struct {
	configs     []gptGPUConfig
	warmup      int // untimed steps (also train's --log-every)
	steps       int // timed steps
	precision   string
	recompute   string   // train --recompute ("": train's default)
	torchModes  []string // the PyTorch script's --modes
	lib         string
	device      int
	trainBin    string
	python      string
	torchOff    bool   // --torch-script none: symddp only
	script      string // --torch-script: the peer of every preset ("": each preset's own in benchDir)
	benchDir    string // the module's bench/
	torchSteps  int
	torchWarmup int
	timeout     time.Duration
	// train runs one train command and returns its stderr and metrics log;
	// torch runs the PyTorch script with args and returns its stdout (tests:
	// recorded ones).
	train func(ctx context.Context, args []string) (stderr string, metrics []byte, err error)
	torch func(ctx context.Context, args []string) (stdout string, err error)
}

// defaultPython is PyTorch's virtual environment on the GPU hosts when it
// is there, else python3.
func defaultPython() string {
	const venv = "/opt/torch/.venv/bin/python3"
	if fileExists(venv) {
		return venv
	}
	return "python3"
}

func parseGPUGPTFlags(args []string) (gpuGPTOpts, error) {
	var o gpuGPTOpts
	fs := pflag.NewFlagSet("symbench gpu-gpt", pflag.ContinueOnError)
	cfgs := fs.StringSlice("configs", defaultGPTGPUConfigs, "models and batches as PRESET/BATCH, or PRESET/max for a llama preset: each side at the largest of 32, 24, 16, 12, 8, 4, 2, 1 sequences that fits the GPU (symddp: train again at the next batch while it runs out of device memory; PyTorch: the script's --fit); PRESET gpt2 (GPT-2 124M, T 1024), medium, large, xl (the larger GPT-2 sizes, T 1024), tiny (gpt-tiny, T 128), small (6 layers, 384 wide, T 256), llama-tiny, llama-124m (T 1024), llama3-1b (T 2048); the torch scripts' presets")
	fs.IntVar(&o.warmup, "warmup", 20, "train's untimed steps (also its --log-every)")
	fs.IntVar(&o.steps, "steps", 100, "train's timed steps; a multiple of --warmup")
	fs.StringVar(&o.precision, "precision", "bf16", "train --precision: bf16 (PyTorch's side runs bf16 autocast), auto or fp32")
	fs.StringVar(&o.recompute, "recompute", "", "train --recompute: none, gelu or block (default: train's); block runs in bf16 too, gelu in fp32 only (--precision fp32)")
	fs.StringSliceVar(&o.torchModes, "torch-modes", []string{"eager", "compile"}, "the PyTorch script's modes: eager, compile, fp32, eager-ckpt, compile-ckpt (the -ckpt ones checkpoint every block's activations, as --recompute block does)")
	fs.StringVar(&o.lib, "lib", "", "path of libsymddp_cuda.so, train's --gpu-lib (default: $SYMDDP_CUDA_LIB, next to symbench, ./build of the directory it runs in or above, up to the module root)")
	fs.IntVar(&o.device, "device", -1, "GPU to use, through CUDA_VISIBLE_DEVICES (-1: GPU 0 of the visible ones)")
	fs.StringVar(&o.trainBin, "train-bin", "", "train binary to run (default: go build ./cmd/train into a temporary directory; without Go, the train binary beside symbench)")
	fs.StringVar(&o.python, "python", defaultPython(), "Python with PyTorch and CUDA")
	fs.StringVar(&o.script, "torch-script", "", "PyTorch peer of every config (default: bench/torch_gpt_bench.py for the GPTs and bench/torch_llama_bench.py for the Llamas, of the module holding the working directory); \"none\": symddp only")
	fs.IntVar(&o.torchSteps, "torch-steps", 0, "the PyTorch script's timed steps (default: --steps; a GPU that reaches its power limit slows after a second or two, so both sides run as long)")
	fs.IntVar(&o.torchWarmup, "torch-warmup", 0, "the PyTorch script's warm-up steps, torch.compile compiling in the first (default: --warmup)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "deadline of one train run, and of one PyTorch run (every batch of a model)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if !fs.Changed("torch-steps") {
		o.torchSteps = o.steps
	}
	if !fs.Changed("torch-warmup") {
		o.torchWarmup = o.warmup
	}
	fitted, fixed := map[string]bool{}, map[string]bool{}
	for _, s := range *cfgs {
		c, err := parseGPTGPUConfig(s)
		if err != nil {
			return o, err
		}
		if fitted[c.preset] || (c.fit && fixed[c.preset]) {
			return o, fmt.Errorf("--configs: %s/max goes alone, without %s at another batch (the PyTorch script searches one way or the other)", c.preset, c.preset)
		}
		fitted[c.preset], fixed[c.preset] = fitted[c.preset] || c.fit, fixed[c.preset] || !c.fit
		o.configs = append(o.configs, c)
	}
	switch {
	case len(o.configs) == 0:
		return o, fmt.Errorf("--configs: none")
	case o.warmup < 1 || o.steps < 1 || o.steps%o.warmup != 0:
		return o, fmt.Errorf("--warmup %d --steps %d: want positive values, steps a multiple of warmup", o.warmup, o.steps)
	case o.torchSteps < 1 || o.torchWarmup < 1:
		return o, fmt.Errorf("--torch-steps %d --torch-warmup %d: want positive values", o.torchSteps, o.torchWarmup)
	case !slices.Contains([]string{"auto", "bf16", "fp32"}, o.precision):
		return o, fmt.Errorf("--precision %q: want bf16, auto or fp32", o.precision)
	case o.recompute != "" && !slices.Contains([]string{"none", "gelu", "block"}, o.recompute):
		return o, fmt.Errorf("--recompute %q: want none, gelu or block", o.recompute)
	case len(o.torchModes) == 0 || slices.ContainsFunc(o.torchModes, func(m string) bool {
		return !slices.Contains([]string{"eager", "compile", "fp32", "eager-ckpt", "compile-ckpt"}, m)
	}):
		return o, fmt.Errorf("--torch-modes %s: want a comma list of eager, compile, fp32, eager-ckpt, compile-ckpt", strings.Join(o.torchModes, ","))
	case o.trainBin != "" && !fileExists(o.trainBin):
		return o, fmt.Errorf("--train-bin %s: no such file (build it with go build ./cmd/train, or carry it: scripts/gpu-compute-prepare.sh)", o.trainBin)
	}
	switch o.script {
	case "none":
		o.script, o.torchOff = "", true
	case "":
		o.benchDir = filepath.Join(moduleRoot(), "bench")
		for _, c := range o.configs {
			if s := o.scriptFor(c.preset); !fileExists(s) {
				return o, fmt.Errorf("no PyTorch peer at %s: run symbench inside the symddp module, or pass --torch-script PATH (or none)", s)
			}
		}
	default:
		if !fileExists(o.script) {
			return o, fmt.Errorf("--torch-script %s: no such file", o.script)
		}
	}
	o.lib = cudaLibFor(o.lib)
	return o, nil
}

// scriptFor is the PyTorch peer that measures preset: --torch-script, or
// the preset's own script in the module's bench/.
func (o gpuGPTOpts) scriptFor(preset string) string {
	if o.script != "" {
		return o.script
	}
	return filepath.Join(o.benchDir, gptPresets[preset].script)
}

// gpuGPTArgs are the arguments of the train run of configuration c, its
// metrics log written to metricsPath: one PE on the nvshmem backend,
// synthetic tokens, PyTorch's optimizer (AdamW, lr 6e-4, betas 0.9 and
// 0.95, weight decay 0.1, no gradient clipping, no warm-up), no evaluation
// until the end (and then of one batch), no sample.
func gpuGPTArgs(o gpuGPTOpts, c gptGPUConfig, metricsPath string) []string {
	args := append([]string{"--backend", "nvshmem", "--pes", "1"}, c.model().args...)
	args = append(args, "--batch-size", strconv.Itoa(c.batch), "--dataset", "synthetic", "--precision", o.precision,
		"--optimizer", "adamw", "--lr", "6e-4", "--beta2", "0.95", "--weight-decay", "0.1", "--clip-norm", "0", "--warmup-steps", "0",
		"--max-steps", strconv.Itoa(o.warmup+o.steps), "--epochs", "1000000", "--log-every", strconv.Itoa(o.warmup),
		"--eval-every", "0", "--eval-batches", "1", "--sample-tokens", "0", "--no-progress", "--metrics", metricsPath)
	if o.recompute != "" {
		args = append(args, "--recompute", o.recompute)
	}
	if o.lib != "" {
		args = append(args, "--gpu-lib", o.lib)
	}
	return args
}

// gpuGPTTorchArgs are the PyTorch script's arguments for preset's batches
// in --torch-modes (eager and torch.compile by default); with fit, the
// script times only the largest of them that fits.
func gpuGPTTorchArgs(o gpuGPTOpts, preset string, batches []int, fit bool) []string {
	bs := make([]string, len(batches))
	for i, b := range batches {
		bs[i] = strconv.Itoa(b)
	}
	args := []string{o.scriptFor(preset), "--preset", gptPresets[preset].torch, "--batch", strings.Join(bs, ","), "--modes", strings.Join(o.torchModes, ","),
		"--steps", strconv.Itoa(o.torchSteps), "--warmup", strconv.Itoa(o.torchWarmup)}
	if fit {
		args = append(args, "--fit")
	}
	return args
}

func runGPUGPT(args []string) error {
	o, err := parseGPUGPTFlags(args)
	if err != nil {
		return err
	}
	return withTrainBinary(o.trainBin, func(ctx context.Context, bin string) error {
		o.train = func(ctx context.Context, args []string) (string, []byte, error) {
			return runTrainForMetrics(ctx, bin, args, o.device, o.timeout)
		}
		o.torch = func(ctx context.Context, args []string) (string, error) {
			return runPython(ctx, o.python, args, o.device, o.timeout)
		}
		return gpuGPT(ctx, o, os.Stdout)
	})
}

// runPython runs python with args within timeout and returns its stdout;
// a failure carries the last lines of its stderr.
func runPython(ctx context.Context, python string, args []string, device int, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, args...)
	if device >= 0 {
		cmd.Env = append(os.Environ(), "CUDA_VISIBLE_DEVICES="+strconv.Itoa(device))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("no result within %v", timeout)
		}
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", python, strings.Join(args, " "), err, lastLine(stderr.String()))
	}
	return stdout.String(), nil
}

// gpuGPT measures every configuration and prints the table. A first train
// run that fails ends it at once (no binary, no library, no GPU: nothing
// would run); a later one leaves its row out and is returned at the end,
// as PyTorch's failures are.
func gpuGPT(ctx context.Context, o gpuGPTOpts, w io.Writer) error {
	rc := ""
	if o.recompute != "" {
		rc = " --recompute " + o.recompute
	}
	fmt.Fprintln(w, "gpu-gpt: GPT training of train --backend nvshmem --pes 1 --dataset synthetic --precision "+o.precision+rc+" (ddp's step: the batch")
	fmt.Fprintln(w, "copied to the GPU, forward, loss, backward, AdamW without clipping; no allreduce at one PE),")
	fmt.Fprintf(w, "%d warm-up steps, then %d timed, from train's metrics log; MFU = tokens/s x (6N + 6LCT) / the GPU's dense peak\n", o.warmup, o.steps)
	if !o.torchOff {
		var names []string
		for _, c := range o.configs {
			if n := filepath.Base(o.scriptFor(c.preset)); !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		fmt.Fprintf(w, "PyTorch: %s (bf16 autocast, fused AdamW, batch resident on the GPU), %d warm-up and %d timed steps\n", strings.Join(names, ", "), o.torchWarmup, o.torchSteps)
	}
	rows := make([]gptGPURow, len(o.configs))
	var failed []error
	for i, c := range o.configs {
		rows[i].torch = map[string]torchGPUGPT{}
		var stderr string
		var metrics []byte
		var err error
		if c.fit {
			for k, b := range fitBatches {
				c.batch = b
				stderr, metrics, err = o.train(ctx, gpuGPTArgs(o, c, metricsFile))
				if err == nil || !strings.Contains(stderr, "out of device memory") || k == len(fitBatches)-1 {
					break
				}
				fmt.Fprintf(w, "symddp %s batch %d: out of device memory (trying batch %d)\n", c.model().label, b, fitBatches[k+1])
			}
		} else {
			stderr, metrics, err = o.train(ctx, gpuGPTArgs(o, c, metricsFile))
		}
		rows[i].cfg = c
		if g, f := trainNotices(stderr); g != "" || f != "" {
			rows[i].gpu, rows[i].fusion = g, f
		}
		if err == nil {
			rows[i].ours, err = readGPTMetrics(metrics, o.warmup, o.warmup+o.steps, c.model().context)
		}
		if err == nil {
			// said at once: a run cut short still has it in its log
			fmt.Fprintf(w, "symddp %s batch %d: %.0f tokens/s%s\n", c.model().label, c.batch, rows[i].ours.tokensPerSec, mfuNote(rows[i].ours))
		}
		if err != nil {
			err = fmt.Errorf("%s batch %d: train: %s", c.model().label, c.batch, trainFailure(err, stderr))
			if i == 0 {
				return err
			}
			rows[i].err = err
			failed = append(failed, err)
		}
	}
	if !o.torchOff {
		failed = append(failed, measureTorchGPT(ctx, o, rows, w)...)
	}
	if err := printGPUGPTTable(w, rows); err != nil {
		return err
	}
	if len(failed) > 0 {
		fmt.Fprintln(w)
		for _, err := range failed {
			fmt.Fprintln(w, "failed:", err)
		}
		return fmt.Errorf("%d of the runs failed (above)", len(failed))
	}
	return nil
}

// measureTorchGPT runs the PyTorch script once per preset, for all its
// batches, and fills in the rows' torch columns; it returns what failed.
func measureTorchGPT(ctx context.Context, o gpuGPTOpts, rows []gptGPURow, w io.Writer) []error {
	var order []string
	batches, fit := map[string][]int{}, map[string]bool{}
	for _, r := range rows {
		p := r.cfg.preset
		if _, seen := batches[p]; !seen {
			order = append(order, p)
		}
		switch {
		case r.cfg.fit:
			batches[p], fit[p] = fitBatches, true
		case !slices.Contains(batches[p], r.cfg.batch):
			batches[p] = append(batches[p], r.cfg.batch)
		}
	}
	var failed []error
	for _, p := range order {
		out, runErr := o.torch(ctx, gpuGPTTorchArgs(o, p, batches[p], fit[p]))
		res, errLines := parseTorchGPUGPT(out)
		for i := range rows {
			if rows[i].cfg.preset != p {
				continue
			}
			for _, t := range res {
				// a search's result is the row's whatever its batch
				if t.preset == gptPresets[p].torch && (t.batch == rows[i].cfg.batch || fit[p]) {
					rows[i].torch[t.mode] = t
				}
			}
		}
		if fit[p] {
			// a batch that did not fit is a step of the search, not a failure
			errLines = slices.DeleteFunc(errLines, func(l string) bool { return strings.Contains(l, "(trying batch ") })
		}
		for _, t := range res {
			mem := ""
			if t.peakMemGiB > 0 {
				mem = fmt.Sprintf(", peak %.2f GiB", t.peakMemGiB)
			}
			fmt.Fprintf(w, "torch %s batch %d %s: %.0f tokens/s, MFU %.1f%%%s\n", gptPresets[p].label, t.batch, t.mode, t.tokensPerSec, 100*t.mfu, mem)
		}
		for _, l := range errLines {
			failed = append(failed, fmt.Errorf("PyTorch: %s", l))
		}
		if runErr != nil && len(errLines) == 0 {
			failed = append(failed, fmt.Errorf("PyTorch %s: %w", gptPresets[p].label, runErr))
		}
	}
	return failed
}

// mfuNote is ", MFU 41.6% (bf16)" when train knew its GPU's peak.
func mfuNote(r gptRun) string {
	if r.mfu <= 0 {
		return ""
	}
	return fmt.Sprintf(", MFU %.1f%% (%s)", 100*r.mfu, r.precision)
}

// trainFailure says in one line why a train run failed: train's own last
// "train: ..." line when it printed one, else its last line, else err's
// first line.
func trainFailure(err error, stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "train: ") {
			return strings.TrimPrefix(l, "train: ")
		}
	}
	if l := lastLine(stderr); l != "" && !strings.HasPrefix(l, "Run 'train --help'") {
		return l
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return first
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
