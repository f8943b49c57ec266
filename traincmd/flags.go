package traincmd

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"

	"github.com/symddp/symddp/internal/floatflag"
	"github.com/symddp/symddp/internal/settings"
)

// options is everything the command line sets.
type options struct {
	pes        int
	backend    string
	model      string
	hidden     string
	dataset    string
	dataDir    string
	trainLimit int
	modelOpts  map[string]string // --model-opt key=value: models.Config.Options
	dataOpts   map[string]string // --data-opt key=value: datasets.LoadConfig.Options
	dataSpec   *datasets.Spec    // a registered dataset's samples, read by chooseData in the launcher

	layers, heads, width, context int     // transformer sizes (0: the preset's)
	vocab                         int     // --vocab: a language model's vocabulary (0: the preset's)
	kvHeads, ffnHidden            int     // a llama's key/value heads and SwiGLU width (0: the preset's)
	ropeTheta                     float64 // a llama's rotary base (0: the preset's)
	initFrom                      string  // --init-from: weights to start from (ddp.Options.InitFrom)
	evalOnly                      bool    // --eval-only: evaluate --init-from's weights, train nothing
	trainShards, valShards        string  // llm.c token shard globs
	corpusMax                     string  // cap of the text corpus
	tokenizer                     string  // --tokenizer for --dataset text: byte or gpt2 (default by model)
	evalBatches                   int
	sampleTokens                  int
	precision                     string  // auto, fp32 or bf16 (compute.Precision)
	recompute                     string  // none, gelu or block (models.Recompute)
	gradDType                     string  // fp32 or bf16: the gradients' type in the cross-PE reduction
	peakTFLOPS                    float64 // --peak-tflops: the peak of one device for MFU (0: the table's)

	epochs      int
	maxSteps    int
	batch       int
	accumulate  int
	lr          float32
	optimizer   string
	momentum    float32
	nesterov    bool
	weightDecay float32
	beta1       float32
	beta2       float32
	eps         float32
	schedule    string
	warmup      int
	stepSize    int
	gamma       float32
	minLR       float32
	clipNorm    float32
	seed        uint64

	bucketSize  string
	shardUpdate bool
	threads     int
	heapSize    string
	timeout     time.Duration
	gpuLib      string
	mps         string
	cudaGraph   bool
	deviceData  string // auto, on, off (ddp.Options.DeviceData)
	logEvery    int
	metrics     string
	checkEvery  int
	skipNaN     bool
	evalEvery   int
	noProgress  bool
	ckptDir     string
	ckptEvery   int
	resume      string
	keepCkpt    int
	faultInject string
	maxRestarts int

	modelKnown    bool            // --model was built (modelDefaults), so languageModel says what it is
	languageModel bool            // --model reads tokens (modelDefaults)
	modelDefault  map[string]bool // flags the model's defaults set (modelDefaults)
	recipe        recipe          // the resolved recipe (resolve, in validate)
	precisions    bool            // --model chooses its precision (models.PrecisionSetter: --precision bf16 applies)

	set  func(name string) bool // whether a flag was given
	args []string               // the command line, for the PEs the launcher starts
}

// usageError is a bad command line: exit code 2. With input set it is a
// problem with the run's files rather than its flags (data that is missing
// or malformed, an output path that cannot be written): exit code 2 too,
// without the pointer to --help.
type usageError struct {
	err   error
	input bool
}

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, a ...any) error { return usageError{err: fmt.Errorf(format, a...)} }

// inputf is a usage error about the run's files (usageError.input).
func inputf(format string, a ...any) error {
	return usageError{err: fmt.Errorf(format, a...), input: true}
}

// inputErr marks err as a usage error about the run's files.
func inputErr(err error) error { return usageError{err: err, input: true} }

const usageHead = `%s: data-parallel training on a symmetric heap.

Usage:
  train [flags]                      start --pes PE processes on this host
  mpirun -np N train [flags]         every MPI process is one PE (--backend mpi or nvshmem)

Examples:
  train --pes 8 --model mlp                          8 PEs, Fashion-MNIST, 5 epochs
  train --pes 4 --optimizer adam --lr 1e-3 --epochs 10
  train --pes 2 --dataset synthetic --max-steps 200
  train --pes 8 --checkpoint-dir ckpt --checkpoint-every 500
  train --pes 8 --checkpoint-dir ckpt --resume latest
  train --pes 2 --model gpt-tiny                     byte-level GPT on Go's source tree, 400 steps
  train --model gpt2 --dataset llmc --train-shards 'fineweb_train_*.bin' --val-shards 'fineweb_val_*.bin'
  train --pes 8 --checkpoint-dir ckpt --checkpoint-every 500 --max-restarts 3
  train --backend nvshmem --model gpt2 --dataset synthetic --max-steps 100   GPT-2 124M's speed and MFU on a GPU

Language models (gpt-tiny, gpt, the gpt2 family, llama-tiny, llama, llama-124m, llama3-1b)
change the defaults below for every flag not given:
  --dataset text (Go's source tree), --batch-size 16, --max-steps 400, --optimizer adamw,
  with adamw --weight-decay 0.1 (matrices only) and --beta2 0.95, --warmup-steps 20 (a tenth of
  shorter runs), --clip-norm 1, --eval-every 100 (steps), --eval-batches 20, --log-every 20.
  The start-up header prints the whole recipe the run uses; checkpoints record it.
A language model a program registers (models.Register) gets these defaults too, and
--layers, --heads, --kv-heads, --width, --ffn-hidden, --context, --vocab and --rope-theta
in its models.Config (docs/LIBRARY.md).

Flags:
`

// parseFlags parses args (without the program name); --help goes to
// stdout. It does not check values: validate does, once run knows whether
// mpirun set the job size.
func parseFlags(args []string, stdout io.Writer) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("train", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)

	fs.IntVar(&o.pes, "pes", 1, "number of PEs (processes) to start on this host; under mpirun, the job size (must match)")
	fs.StringVar(&o.backend, "backend", "auto", "comm backend: auto|shm|nvshmem|mpi (auto: mpi under mpirun, shm otherwise)")
	fs.StringVar(&o.model, "model", "mlp", "model name (see --list-models)")
	fs.StringVar(&o.hidden, "hidden", "", "hidden layer widths of the mlp, comma-separated (default 256,256)")
	fs.StringVar(&o.dataset, "dataset", "fashion-mnist", "dataset: fashion-mnist|mnist|synthetic for classifiers; text|llmc|synthetic for language models (default text for them; synthetic: pseudo-random tokens over the model's vocabulary, computed as batches are gathered, for measuring speed: the loss stays near ln(vocabulary))")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory with the IDX files (default /usr/share/datasets/<dataset>); with --dataset text a text file or directory (default: Go's own source tree)")
	fs.IntVar(&o.trainLimit, "train-limit", 0, "use only the first N training samples (0: all)")
	modelOpts := fs.StringArray("model-opt", nil, "key=value setting for a model a program registered (models.Config.Options; repeatable); the built-in models are sized with --hidden, --layers, --heads and the like")
	dataOpts := fs.StringArray("data-opt", nil, "key=value setting for a dataset a program registered (datasets.LoadConfig.Options; repeatable); the built-in datasets take --data-dir, --corpus-max, --tokenizer, --train-shards and the like")
	fs.IntVar(&o.layers, "layers", 0, "transformer blocks of a gpt or llama model (0: the preset's)")
	fs.IntVar(&o.heads, "heads", 0, "attention (query) heads of a gpt or llama model (0: the preset's)")
	fs.IntVar(&o.kvHeads, "kv-heads", 0, "key/value heads of a llama model (grouped-query attention: --heads a multiple of it; 0: the preset's)")
	fs.IntVar(&o.width, "width", 0, "embedding width of a gpt or llama model (0: the preset's)")
	fs.IntVar(&o.ffnHidden, "ffn-hidden", 0, "SwiGLU hidden width of a llama model (0: the preset's, from the width as Llama rounds it)")
	fs.Float64Var(&o.ropeTheta, "rope-theta", 0, "rotary embedding base of a llama model (0: the preset's; Llama 3 uses 500000)")
	fs.IntVar(&o.context, "context", 0, "context length (tokens) of a gpt or llama model (0: the preset's)")
	fs.IntVar(&o.vocab, "vocab", 0, "vocabulary of a gpt or llama model: token ids 0..N-1, for shards of another tokenizer (0: the preset's, 256 for gpt, gpt-tiny, llama and llama-tiny, 50304 for the gpt2 family and llama-124m, 128256 for llama3-1b)")
	fs.BoolVar(&o.evalOnly, "eval-only", false, "evaluate the weights of --init-from on the validation (test) set and exit, training nothing and writing no checkpoint: the loss (a classifier's accuracy, a byte-level model's bits per byte) over --eval-batches global batches (0: the whole set), then a language model's sample")
	fs.StringVar(&o.initFrom, "init-from", "", "start from these weights with fresh optimizer state, step, schedule and data (fine-tuning): a Hugging Face directory (config.json + model.safetensors) of GPT2LMHeadModel for a gpt model or LlamaForCausalLM for a llama model, sizes as the model's flags, or a symddp checkpoint file or --checkpoint-dir; not with --resume")
	fs.StringVar(&o.trainShards, "train-shards", "", "--dataset llmc: glob of llm.c training token shards (e.g. 'data/fineweb_train_*.bin')")
	fs.StringVar(&o.valShards, "val-shards", "", "--dataset llmc: glob of llm.c validation token shards")
	fs.StringVar(&o.tokenizer, "tokenizer", "auto", "--dataset text: how text becomes tokens: byte (256 byte values), gpt2 (GPT-2's BPE, 50257 tokens, offline; each file one document after <|endoftext|>), or auto (gpt2 for a vocabulary of 50257 to 50304: the gpt2 family and llama-124m; byte otherwise, llama3-1b's 128256 included: train it on llm.c's Llama 3 shards, --dataset llmc)")
	fs.StringVar(&o.corpusMax, "corpus-max", "0", "--dataset text: use at most this much of the corpus, e.g. 16MiB (0: all)")
	fs.StringVar(&o.precision, "precision", "auto", "how a language model (gpt, llama, or one a program registered, such as examples/ownlm) computes: auto (bf16 where the engine has a bf16 form of every layer of the model at its sizes, the GPU engine of --backend nvshmem; fp32 elsewhere), bf16 (bf16 activations and GEMMs accumulating in fp32, fp32 master weights, gradients and optimizer state; GPU engine only), fp32 (fp32 throughout; the CPU engine's only mode). The mlp trains in fp32: auto or fp32")
	fs.StringVar(&o.recompute, "recompute", "none", "activations a gpt or llama model recomputes in backward instead of keeping them from forward; the trained bits are the same in every mode: "+
		"none (keep them all); "+
		"gelu (keep the MLP's widest activation, the GELU's output of 4x the width, a llama's SwiGLU output, in one buffer for all layers and recompute it in backward: one elementwise pass per layer, almost free; gpt2 at 16 sequences: 27.9 GiB of activations instead of 30.0; fp32 only: with --backend nvshmem a gpt or llama model that runs in bf16 refuses it); "+
		"block (keep each layer's input, the residual stream, and the activations of one layer in memory all layers share; each layer's backward runs its forward again first: about one more forward of every layer a step, a third more of the blocks' arithmetic; in fp32 and in bf16 on the GPU: gpt2 at 16 sequences 9.0 GiB in fp32, most of it the logits; gpt2-xl at 16 sequences in bf16 5.25 GiB instead of 39.76). "+
		"The start-up header gives the activations with and without it, --list-models the whole memory per PE with and without block")
	fs.StringVar(&o.gradDType, "grad-dtype", "fp32", "the type gradients are summed across PEs in: fp32, or bf16 (half the bytes; each PE's gradients and their sum rounded to bf16, the update still fp32; GPU step path of --backend nvshmem only)")
	fs.Float64Var(&o.peakTFLOPS, "peak-tflops", 0, "language models: the dense peak TFLOP/s of one GPU at the run's precision (of the host's CPUs on the CPU engine), against which MFU (model FLOPs utilisation: tokens/s x FLOPs per token / peak) is printed; default: the dense (not sparse) peak of a known GPU by its name (H200 and H100 SXM: bf16 989, fp32 67; H100 PCIe: 756, 51; A100: 312, 19.5), and no MFU on the CPU")

	fs.IntVar(&o.epochs, "epochs", 5, "passes over the training set (0 with --max-steps: as many as those steps take)")
	fs.IntVar(&o.maxSteps, "max-steps", 0, "stop after this many optimizer steps (0: no limit)")
	fs.IntVar(&o.batch, "batch-size", 256, "global batch size (all PEs together); a multiple of --pes x --accumulate")
	fs.IntVar(&o.accumulate, "accumulate", 1, "micro-batches per optimizer step (gradient accumulation)")
	fs.Float32Var(&o.lr, "lr", 0, "learning rate (default 0.05 for sgd, 0.001 for adam and adamw)")
	fs.StringVar(&o.optimizer, "optimizer", "sgd", "optimizer: "+strings.Join(optim.Names(), "|"))
	fs.Float32Var(&o.momentum, "momentum", 0.9, "momentum of sgd (0: none)")
	fs.BoolVar(&o.nesterov, "nesterov", false, "SGD with Nesterov momentum")
	fs.Float32Var(&o.weightDecay, "weight-decay", 0, "weight decay (L2 for sgd and adam, decoupled for adamw; default 0, adamw 0.01, language models with adamw 0.1 on matrices)")
	fs.Float32Var(&o.beta1, "beta1", 0.9, "beta1 of adam and adamw")
	fs.Float32Var(&o.beta2, "beta2", 0.999, "beta2 of adam and adamw (language models with adamw: 0.95)")
	fs.Float32Var(&o.eps, "eps", 1e-8, "epsilon of adam and adamw")
	fs.StringVar(&o.schedule, "schedule", "cosine", "learning-rate schedule: "+strings.Join(optim.ScheduleNames(), "|"))
	fs.IntVar(&o.warmup, "warmup-steps", 0, "linear warm-up steps before the schedule")
	fs.IntVar(&o.stepSize, "step-size", 1000, "steps between decays of the step schedule")
	fs.Float32Var(&o.gamma, "gamma", 0.1, "decay factor of the step schedule")
	fs.Float32Var(&o.minLR, "min-lr", 0, "final learning rate of the cosine schedule")
	fs.Float32Var(&o.clipNorm, "clip-norm", 0, "clip the global gradient norm to this value (0: off)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of initialisation and data order")

	fs.StringVar(&o.bucketSize, "bucket-size", "auto", "gradient bucket size: backward starts each bucket's reduction (its allreduce, or its reduce-scatter under --shard-update) as soon as it is final, on the GPU on a collectives stream beside backward (0: one reduction at the end of backward; auto: 1MiB on the CPU; on the GPU 25MiB where each PE has a GPU of its own, 0 where PEs share one, whose SMs the reductions would take from backward: docs/GPU.md)")
	fs.BoolVar(&o.shardUpdate, "shard-update", true, "each PE updates 1/PEs of the parameters and keeps that part of the optimizer state, between a reduce-scatter and an all-gather (ZeRO-1: shm and mpi on the CPU, nvshmem on the GPU step path); false: every PE updates all of them after an allreduce")
	fs.IntVar(&o.threads, "threads", 0, "BLAS threads per PE (0: cores / PEs)")
	fs.StringVar(&o.heapSize, "heap-size", "", "symmetric heap size per PE, e.g. 512MiB (default: what the model needs)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "deadline of every barrier and allreduce; a PE that misses it is reported")
	fs.StringVar(&o.gpuLib, "gpu-lib", "", "path of libsymddp_cuda.so (nvshmem backend; default $SYMDDP_CUDA_LIB, next to the binary, ./build)")
	fs.StringVar(&o.mps, "mps", "auto", "CUDA MPS for PEs sharing a GPU: auto|on|off")
	fs.BoolVar(&o.cudaGraph, "cuda-graph", true, "capture the training step in a CUDA graph (nvshmem backend)")
	fs.StringVar(&o.deviceData, "data-on-device", "auto", "nvshmem backend: keep the training set in GPU memory and gather each batch there by index, so a step copies indices instead of samples: auto (when it is rows of float inputs with a label each, up to 4 GiB), on (an error when it cannot), off")

	fs.IntVar(&o.logEvery, "log-every", 50, "steps between metric reports")
	fs.StringVar(&o.metrics, "metrics", "", "write metrics as JSON lines to this file (PE 0)")
	fs.IntVar(&o.checkEvery, "check-replicas-every", 0, "compare parameter hashes across PEs every N steps (0: at the end only)")
	fs.BoolVar(&o.skipNaN, "skip-nonfinite", false, "skip steps with NaN/Inf loss or gradients instead of stopping")
	fs.IntVar(&o.evalEvery, "eval-every", 1, "evaluate on the test set every N epochs; for language models every N steps (default 100) on the validation set (0: at the end only)")
	fs.IntVar(&o.evalBatches, "eval-batches", 0, "evaluate on the first N global batches of the test set only (0: all; language models default 20)")
	fs.IntVar(&o.sampleTokens, "sample-tokens", 200, "language models: print a sample of this many tokens at the end (0: none)")
	fs.BoolVar(&o.noProgress, "no-progress", false, "no progress bar even on a terminal")

	fs.StringVar(&o.ckptDir, "checkpoint-dir", "", "directory for checkpoints (off when empty); one that holds checkpoints takes --resume")
	fs.IntVar(&o.ckptEvery, "checkpoint-every", 0, "write a checkpoint every N steps (and always at the end)")
	fs.StringVar(&o.resume, "resume", "", "resume from 'latest' in --checkpoint-dir or from a checkpoint file")
	fs.IntVar(&o.keepCkpt, "keep-checkpoints", 3, "checkpoints kept in --checkpoint-dir")
	fs.IntVar(&o.maxRestarts, "max-restarts", 0, "when a PE fails, stop the others and start all PEs again from the latest checkpoint in --checkpoint-dir, up to N times")
	fs.StringVar(&o.faultInject, "fault-inject", "", "testing only: make a PE fail, e.g. pe=2,step=5,mode=exit|panic|kill|hang|nan")
	_ = fs.MarkHidden("fault-inject")

	help := fs.BoolP("help", "h", false, "show this help")
	listModels := fs.Bool("list-models", false, "list the registered models and exit")
	helpEnv := fs.Bool("help-env", false, "list the SYMDDP_* environment variables and exit")

	if err := fs.Parse(args); err != nil {
		return nil, usageError{err: err}
	}
	if *help {
		fmt.Fprintf(stdout, usageHead, Program)
		fmt.Fprint(stdout, fs.FlagUsages())
		return nil, errHelp
	}
	if *helpEnv {
		settings.WriteHelp(stdout) // on stdout, like --help
		return nil, errHelp
	}
	if *listModels {
		return o, errListModels // with --recompute, which it sizes the models for
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if err := floatflag.CheckFinite(fs); err != nil {
		return nil, usageError{err: err}
	}
	o.set = func(name string) bool { return fs.Changed(name) }
	var err error
	if o.modelOpts, err = keyValues("--model-opt", *modelOpts); err != nil {
		return nil, err
	}
	if o.dataOpts, err = keyValues("--data-opt", *dataOpts); err != nil {
		return nil, err
	}
	if err := o.modelDefaults(); err != nil {
		return nil, err
	}
	return o, nil
}

// modelDefaults gives the model's training defaults (models.DefaultsOf:
// its own, or models.LanguageModelDefaults for a model that reads tokens)
// to each flag the user did not set, and notes which it set (recipe.go
// resolves the rest).
func (o *options) modelDefaults() error {
	m, err := models.New(o.model, models.Config{Options: o.modelOpts}) // the preset: bad sizes are reported where the model is built
	if err != nil {
		// a registered model may need the size flags to be built at all
		m, err = models.New(o.model, o.modelConfig())
	}
	if err != nil {
		return nil // an unknown model, or one that settings do not build, is reported where the model is built
	}
	o.modelKnown = true
	_, o.precisions = m.(models.PrecisionSetter)
	o.languageModel = m.Data().Tokens
	d, ok := models.DefaultsOf(m)
	if !ok {
		return nil
	}
	o.modelDefault = map[string]bool{}
	def := func(name string, has bool, apply func()) {
		if has && !o.set(name) {
			apply()
			o.modelDefault[name] = true
		}
	}
	def("dataset", d.Dataset != "", func() { o.dataset = d.Dataset })
	def("batch-size", d.Batch > 0, func() { o.batch = d.Batch })
	def("max-steps", d.Steps > 0 && !o.set("epochs"), func() { o.maxSteps = d.Steps })
	def("optimizer", d.Optimizer != "", func() { o.optimizer = d.Optimizer })
	if o.optimizer == d.Optimizer { // another optimizer keeps its own defaults
		def("weight-decay", d.WeightDecay > 0, func() { o.weightDecay = d.WeightDecay })
		def("beta2", d.Beta2 > 0, func() { o.beta2 = d.Beta2 })
	}
	// a run shorter than 10 x WarmupSteps warms up for a tenth of it
	// (recipe.forRun, once the PEs know the run's steps)
	def("warmup-steps", d.WarmupSteps > 0, func() { o.warmup = d.WarmupSteps })
	def("clip-norm", d.ClipNorm > 0, func() { o.clipNorm = d.ClipNorm })
	def("eval-every", d.EvalEvery > 0, func() { o.evalEvery = d.EvalEvery })
	def("eval-batches", d.EvalBatches > 0, func() { o.evalBatches = d.EvalBatches })
	def("log-every", d.LogEvery > 0, func() { o.logEvery = d.LogEvery })
	if !o.languageModel {
		return nil
	}
	if _, registered := datasets.Registered(o.dataset); o.dataset != "text" && o.dataset != "llmc" && o.dataset != "synthetic" && !registered {
		return usagef("--dataset %s: model %s is a language model: use --dataset text (byte-level text), llmc (llm.c token shards) or synthetic (pseudo-random tokens, for speed)", o.dataset, o.model)
	}
	return nil
}

// modelConfig is the model's configuration from the flags (the data's
// shapes are added where the data is loaded).
func (o *options) modelConfig() models.Config {
	hidden, _ := o.hiddenSizes()
	cfg := models.Config{Hidden: hidden, Layers: o.layers, Heads: o.heads, Width: o.width, Context: o.context, Vocab: o.vocab,
		KVHeads: o.kvHeads, FFNHidden: o.ffnHidden, RopeTheta: o.ropeTheta,
		Precision: o.computePrecision(), Recompute: models.Recompute(o.recompute), Options: o.modelOpts}
	if s := o.dataSpec; s != nil && !s.Tokens {
		cfg.Input, cfg.Classes = s.Input, s.Classes
	}
	return cfg
}

// computePrecision is --precision as the models take it ("" for auto).
func (o *options) computePrecision() compute.Precision {
	if o.precision == "auto" {
		return compute.PrecisionAuto
	}
	return compute.Precision(o.precision)
}

// checkPrecision checks --precision against the model and the backend,
// --grad-dtype, --data-on-device and --peak-tflops.
func (o *options) checkPrecision() error {
	switch o.precision {
	case "auto", "fp32", "bf16":
	default:
		return usagef("--precision %q: want auto, bf16 or fp32", o.precision)
	}
	switch o.gradDType {
	case "fp32", "bf16":
	default:
		return usagef("--grad-dtype %q: want fp32 or bf16", o.gradDType)
	}
	if o.gradDType == "bf16" && o.backend != "nvshmem" {
		return usagef("--grad-dtype bf16 needs the GPU step path (--backend nvshmem); the CPU backends sum gradients in fp32")
	}
	switch o.deviceData {
	case "auto", "on", "off":
	default:
		return usagef("--data-on-device %q: want auto, on or off", o.deviceData)
	}
	if o.backend != "nvshmem" {
		for _, f := range []string{"data-on-device", "cuda-graph", "gpu-lib", "mps"} {
			if o.set(f) {
				return usagef("--%s applies to the GPU (--backend nvshmem), not to --backend %s (the CPU)", f, o.backend)
			}
		}
	}
	if o.precision == "bf16" && !o.precisions && contains(models.Names(), o.model) { // an unknown model is reported where it is built
		who := "model " + o.model
		if o.model == "mlp" {
			who = "the MLP"
		}
		return usagef("--precision bf16: %s trains in fp32 (bf16 is for models that choose their precision, models.PrecisionSetter: the language models); use --precision auto or fp32", who)
	}
	if o.precision == "bf16" && o.backend != "nvshmem" {
		return usagef("--precision bf16 needs the GPU engine (--backend nvshmem); the CPU engine computes in fp32")
	}
	switch p := o.peakTFLOPS; {
	case p < 0 || p > 1e9: // NaN and Inf: floatflag.CheckFinite, above
		return usagef("--peak-tflops %g: want a positive peak in TFLOP/s, e.g. 989", p)
	case o.set("peak-tflops") && p == 0:
		return usagef("--peak-tflops 0: want a positive peak in TFLOP/s, e.g. 989 (leave it out for the table of known GPUs)")
	case p > 0 && !o.languageModel:
		return usagef("--peak-tflops: MFU is printed for the language models (the gpt and llama models), not for %s", o.model)
	}
	return nil
}

// checkRecompute checks --recompute against the model and the path it
// runs on: a model that does not recompute (it is no models.Recomputer, or
// ignores the mode) refuses any mode but none; a model that the GPU runs
// in bf16 (one that takes --precision bf16) refuses gelu, which has no
// bf16 form, saying to use block or fp32.
func (o *options) checkRecompute() error {
	r, err := models.ParseRecompute(o.recompute)
	if err != nil {
		return usagef("--recompute %q: want none, gelu or block", o.recompute)
	}
	if r == models.RecomputeNone || !contains(models.Names(), o.model) { // an unknown model is reported where it is built
		return nil
	}
	plain := o.modelConfig()
	plain.Recompute = models.RecomputeNone
	if _, err := models.New(o.model, plain); err != nil {
		return nil // reported where the model is built
	}
	m, err := models.New(o.model, o.modelConfig())
	if err != nil {
		return usageError{err: err} // "model mlp: recompute block: ..."
	}
	if rm, ok := m.(models.Recomputer); !ok || rm.Recompute() != r {
		return usagef("--recompute %s: model %s does not recompute activations (the gpt and llama models do)", r, o.model)
	}
	if r == models.RecomputeGELU && o.precisions && o.backend == "nvshmem" && o.precision != "fp32" && o.takesBF16() {
		return usagef("--recompute gelu: with --backend nvshmem and --precision %s model %s runs in bf16, where the MLP's activation (a gpt's GELU, a llama's SwiGLU) is not recomputed: use --recompute block, or add --precision fp32 to recompute gelu in fp32",
			o.precision, o.model)
	}
	return nil
}

// takesBF16 says whether the model is made at --precision bf16 (the gpt
// and llama models are; a factory that refuses it has no bf16 form).
func (o *options) takesBF16() bool {
	cfg := o.modelConfig()
	cfg.Precision, cfg.Recompute = compute.PrecisionBF16, models.RecomputeNone
	_, err := models.New(o.model, cfg)
	return err == nil
}

var (
	errHelp       = errors.New("help")
	errListModels = errors.New("list models")
)

// validate checks ranges and combinations; every failure is a usage error.
func (o *options) validate() error {
	switch {
	case o.pes < 1:
		return usagef("--pes %d: need at least 1 PE", o.pes)
	case o.pes > 1024:
		return usagef("--pes %d: at most 1024 PEs on one host", o.pes)
	case o.batch < 1:
		return usagef("--batch-size %d: must be positive", o.batch)
	case o.accumulate < 1:
		return usagef("--accumulate %d: must be at least 1", o.accumulate)
	case o.epochs < 1 && o.maxSteps == 0:
		return usagef("--epochs %d: must be at least 1", o.epochs)
	case o.epochs < 0:
		return usagef("--epochs %d: must not be negative", o.epochs)
	case o.maxSteps < 0:
		return usagef("--max-steps %d: must not be negative", o.maxSteps)
	case o.momentum < 0 || o.momentum >= 1:
		return usagef("--momentum %g: must be in [0, 1)", o.momentum)
	case o.logEvery < 1:
		return usagef("--log-every %d: must be at least 1", o.logEvery)
	case o.checkEvery < 0 || o.evalEvery < 0 || o.ckptEvery < 0 || o.evalBatches < 0 || o.sampleTokens < 0:
		for _, f := range []struct {
			name string
			v    int
			zero string
		}{{"check-replicas-every", o.checkEvery, "at the end only"}, {"eval-every", o.evalEvery, "at the end only"},
			{"checkpoint-every", o.ckptEvery, "at the end only"}, {"eval-batches", o.evalBatches, "the whole set"},
			{"sample-tokens", o.sampleTokens, "no sample"}} {
			if f.v < 0 {
				return usagef("--%s %d: must not be negative (0: %s)", f.name, f.v, f.zero)
			}
		}
	case o.languageModel && o.set("hidden"):
		return usagef("--hidden sizes the mlp; model %s is sized with --layers, --heads, --width and --context", o.model)
	case o.languageModel && o.set("train-limit"):
		return usagef("--train-limit applies to classifiers; for model %s shorten the text with --corpus-max", o.model)
	case o.modelKnown && !o.languageModel && (o.set("layers") || o.set("heads") || o.set("width") || o.set("context") || o.set("vocab") ||
		o.set("kv-heads") || o.set("ffn-hidden") || o.set("rope-theta")):
		return usagef("--layers, --heads, --width, --context, --vocab, --kv-heads, --ffn-hidden and --rope-theta size a language model, not %s", o.model)
	case o.vocab < 0:
		return usagef("--vocab %d: must be positive (0: the model's own)", o.vocab)
	case o.initFrom != "" && o.resume != "":
		return usagef("--init-from and --resume: --resume continues a run with its own weights; give one of them")
	case o.evalOnly && o.initFrom == "":
		return usagef("--eval-only evaluates the weights of --init-from: give it a checkpoint file, a --checkpoint-dir or a Hugging Face directory")
	case o.evalOnly && (o.ckptDir != "" || o.maxRestarts > 0):
		return usagef("--eval-only trains nothing and writes no checkpoint: drop --checkpoint-dir and --max-restarts")
	case o.keepCkpt < 1:
		return usagef("--keep-checkpoints %d: must be at least 1", o.keepCkpt)
	case o.set("keep-checkpoints") && o.ckptDir == "":
		return usagef("--keep-checkpoints needs --checkpoint-dir")
	case o.set("sample-tokens") && o.sampleTokens > 0 && !o.languageModel:
		return usagef("--sample-tokens: samples are printed by the language models, not by %s", o.model)
	case o.threads < 0:
		return usagef("--threads %d: must not be negative", o.threads)
	case o.timeout <= 0:
		return usagef("--timeout %v: must be positive", o.timeout)
	case o.trainLimit < 0:
		return usagef("--train-limit %d: must not be negative", o.trainLimit)
	case o.maxRestarts < 0:
		return usagef("--max-restarts %d: must not be negative", o.maxRestarts)
	case o.maxRestarts > 0 && o.ckptDir == "":
		return usagef("--max-restarts needs --checkpoint-dir: a restart resumes from the latest checkpoint there")
	}
	if q := o.pes * o.accumulate; o.batch%q != 0 {
		lo := o.batch / q * q
		if lo == 0 {
			return usagef("--batch-size %d is smaller than --pes %d x --accumulate %d: use %d or a multiple of it", o.batch, o.pes, o.accumulate, q)
		}
		return usagef("--batch-size %d is not a multiple of --pes %d x --accumulate %d: use %d or %d", o.batch, o.pes, o.accumulate, lo, lo+q)
	}
	switch o.backend {
	case "auto", "shm", "nvshmem", "mpi":
	default:
		return usagef("--backend %q: want auto, shm, nvshmem or mpi", o.backend)
	}
	if _, registered := datasets.Registered(o.dataset); !registered {
		switch o.dataset {
		case "fashion-mnist", "mnist", "synthetic", "text", "llmc":
		default:
			extra := ""
			if names := datasets.RegisteredNames(); len(names) > 0 {
				extra = "; registered by this program: " + strings.Join(names, ", ")
			}
			return usagef("--dataset %q: want fashion-mnist, mnist or synthetic (classifiers), text or llmc (language models)%s", o.dataset, extra)
		}
	}
	if err := o.checkModelOpts(); err != nil {
		return err
	}
	if err := o.checkHeads(); err != nil {
		return err
	}
	if err := o.checkDataFlags(); err != nil {
		return err
	}
	switch o.mps {
	case "auto", "on", "off":
	default:
		return usagef("--mps %q: want auto, on or off", o.mps)
	}
	if !contains(optim.Names(), o.optimizer) {
		return usagef("--optimizer %q: want one of %s", o.optimizer, strings.Join(optim.Names(), ", "))
	}
	if !contains(optim.ScheduleNames(), o.schedule) {
		return usagef("--schedule %q: want one of %s", o.schedule, strings.Join(optim.ScheduleNames(), ", "))
	}
	if o.nesterov && o.momentum == 0 {
		return usagef("--nesterov needs --momentum > 0")
	}
	if o.resume != "" && o.ckptDir == "" && o.resume == "latest" {
		return usagef("--resume latest needs --checkpoint-dir")
	}
	if o.ckptEvery > 0 && o.ckptDir == "" {
		return usagef("--checkpoint-every needs --checkpoint-dir")
	}
	if err := o.checkModelScale(); err != nil { // before the checks below build the model
		return err
	}
	if err := o.checkSizesRead(); err != nil {
		return err
	}
	if err := o.checkPrecision(); err != nil {
		return err
	}
	if err := o.checkRecompute(); err != nil {
		return err
	}
	rc, err := o.resolve()
	if err != nil {
		return err
	}
	o.recipe = rc
	if _, err := o.hiddenSizes(); err != nil {
		return err
	}
	if _, err := bucketBytes(o.bucketSize); err != nil {
		return err
	}
	if o.heapSize != "" {
		if _, err := parseBytes("--heap-size", o.heapSize, false); err != nil {
			return err
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// hiddenSizes parses --hidden.
func (o *options) hiddenSizes() ([]int, error) {
	if strings.TrimSpace(o.hidden) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(o.hidden, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, usagef("--hidden %q: want positive widths separated by commas, e.g. 256,256", o.hidden)
		}
		out = append(out, n)
	}
	return out, nil
}

// keyValues parses repeated key=value flags into a map (nil for none).
func keyValues(flag string, list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usagef("%s %q: want key=value", flag, kv)
		}
		if _, dup := m[k]; dup {
			return nil, usagef("%s: %s given twice", flag, k)
		}
		m[k] = v
	}
	return m, nil
}

// parseBytes reads sizes like 4096, 64KiB, 1MiB, 2G.
// bucketBytes is ddp.Options.BucketBytes for --bucket-size s: 0 for auto
// (ddp's default: 1 MiB buckets on the host paths; on the GPU step path
// ddp.DefaultDeviceBucketBytes where each PE has a GPU of its own, one
// reduction after backward where PEs share one), -1 for 0 (one reduction
// after backward everywhere), else the size.
func bucketBytes(s string) (int, error) {
	if strings.EqualFold(strings.TrimSpace(s), "auto") {
		return 0, nil
	}
	n, err := parseBytes("--bucket-size", s, true)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return -1, nil
	}
	return int(n), nil
}

func parseBytes(flag, s string, zeroOK bool) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
		{"TB", 1000 * 1000 * 1000 * 1000}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 || (n == 0 && !zeroOK) {
		return 0, usagef("%s %q: want a size such as 4096, 64KiB or 1MiB", flag, s)
	}
	if n > math.MaxInt64/mult { // it wrapped around to a small size, and was taken
		return 0, usagef("%s %q: more than 8 EiB, the largest size a number here holds", flag, s)
	}
	return n * mult, nil
}
