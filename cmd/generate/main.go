// Command generate samples text from a language model that train wrote a
// checkpoint of:
//
//	generate --checkpoint ckpt --prompt 'func main() {' --max-tokens 200
//
// It reads the newest valid checkpoint of a directory (or the file named),
// rebuilds the model from the sizes the checkpoint records, and continues
// the prompt one token at a time on one PE (the CPU engine), with
// --temperature, --top-k and --seed. A byte-level model (vocabulary 256)
// takes the prompt as text and prints text; a model with a larger
// vocabulary (GPT-2's tokens, from llm.c shards) takes --prompt-tokens and
// prints token ids, since symddp has no GPT-2 tokenizer.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	checkpoint   string
	prompt       string
	promptTokens string
	maxTokens    int
	temperature  float64
	topK         int
	seed         uint64
	device       string // cpu or gpu
	gpuLib       string
}

// usageError is a bad command line (exit 2).
type usageError struct{ error }

// fileError is a checkpoint that cannot be used (exit 2, without the
// pointer to --help: the flags were fine).
type fileError struct{ error }

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = generate(o, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "generate:", err)
		var ue usageError
		var fe fileError
		switch {
		case errors.As(err, &ue):
			fmt.Fprintln(stderr, "Run 'generate --help' for the flags.")
			return 2
		case errors.As(err, &fe):
			return 2
		}
		return 1
	}
	return 0
}

func parse(args []string, stdout io.Writer) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("generate", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.checkpoint, "checkpoint", "", "checkpoint file, or a --checkpoint-dir of train (its newest valid checkpoint)")
	fs.StringVar(&o.prompt, "prompt", "\n", "text to continue (byte-level models)")
	fs.StringVar(&o.promptTokens, "prompt-tokens", "", "token ids to continue, comma-separated (models with a larger vocabulary)")
	fs.IntVar(&o.maxTokens, "max-tokens", 200, "tokens to generate")
	fs.Float64Var(&o.temperature, "temperature", 0.8, "sampling temperature (0: always the most likely token)")
	fs.IntVar(&o.topK, "top-k", 40, "draw from the K most likely tokens only (0: all)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the draws")
	fs.StringVar(&o.device, "device", "cpu", "cpu, or gpu: the CUDA engine (the model runs fused in bf16; needs libsymddp_cuda.so, see --gpu-lib)")
	fs.StringVar(&o.gpuLib, "gpu-lib", "", "path of libsymddp_cuda.so for --device gpu (default: SYMDDP_CUDA_LIB, next to the binary, or ./build)")
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	if *help {
		fmt.Fprint(stdout, "generate: sample from a language model checkpoint written by train.\n\nUsage:\n  generate --checkpoint DIR|FILE [--prompt TEXT] [flags]\n\nFlags:\n")
		fmt.Fprint(stdout, fs.FlagUsages())
		return nil, pflag.ErrHelp
	}
	switch {
	case fs.NArg() > 0:
		return nil, usageError{fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))}
	case o.checkpoint == "":
		return nil, usageError{errors.New("--checkpoint is required: a checkpoint file or directory written by train --checkpoint-dir")}
	case o.maxTokens < 1:
		return nil, usageError{fmt.Errorf("--max-tokens %d: must be at least 1", o.maxTokens)}
	case o.temperature < 0:
		return nil, usageError{fmt.Errorf("--temperature %g: must not be negative", o.temperature)}
	case o.topK < 0:
		return nil, usageError{fmt.Errorf("--top-k %d: must not be negative", o.topK)}
	case o.device != "cpu" && o.device != "gpu":
		return nil, usageError{fmt.Errorf("--device %q: want cpu or gpu", o.device)}
	case fs.Changed("prompt") && o.promptTokens != "":
		return nil, usageError{errors.New("give --prompt (text) or --prompt-tokens (token ids), not both")}
	}
	return o, nil
}

// gpt2Tokens is GPT-2's real vocabulary (the gpt2 preset pads it to 50304).
const gpt2Tokens = 50257

// drawVocab is the number of tokens to draw from for a checkpoint of model
// with vocab rows in wte: GPT-2's 50257 for the gpt2 preset's padded 50304
// (the padding ids are never drawn), else 0 (all).
func drawVocab(model string, vocab int) int {
	if model == "gpt2" && vocab == models.GPT2.Vocab {
		return gpt2Tokens
	}
	return 0
}

// newGPUEngine makes --device gpu's engine (tests put an emulated one in).
var newGPUEngine = func(lib string) (compute.Engine, error) { return cuda.New(cuda.Options{LibPath: lib}) }

// generateOnCPU samples on the CPU engine with m built over host arenas.
func generateOnCPU(o *options, w *ddp.Weights, m *models.GPT, prompt []int32, so models.SampleOptions) ([]int32, error) {
	e, err := cpu.New(cpu.Options{Threads: 0})
	if err != nil {
		return nil, err
	}
	specs := m.Params()
	offsets, n := models.Layout(specs)
	pa, ga := compute.HostArena(make([]float32, n)), compute.HostArena(make([]float32, n))
	var pv, gv []compute.Tensor
	for i, s := range specs {
		pv = append(pv, e.View(pa, offsets[i], s.Shape...))
		gv = append(gv, e.View(ga, offsets[i], s.Shape...))
	}
	if err := m.Build(e, pv, gv, 1); err != nil {
		return nil, err
	}
	if err := models.LoadParams(e, specs, pv, w.Read); err != nil {
		return nil, err
	}
	return m.Generate(context.Background(), prompt, o.maxTokens, so)
}

// generateOnDevice samples on the CUDA engine: the checkpoint's values in
// device memory, the model fused in bf16 (models.NewSampler).
func generateOnDevice(o *options, w *ddp.Weights, m *models.GPT, prompt []int32, so models.SampleOptions) ([]int32, error) {
	e, err := newGPUEngine(o.gpuLib)
	if err != nil {
		return nil, fmt.Errorf("--device gpu: %w", err)
	}
	if c, ok := e.(interface{ Close() error }); ok {
		defer c.Close()
	}
	specs := m.Params()
	offsets, n := models.Layout(specs)
	params := make([]float32, n)
	for i, s := range specs {
		if err := w.Read(s.Name, params[offsets[i]:offsets[i]+s.Size()]); err != nil {
			return nil, err
		}
	}
	s, err := models.NewSampler(m, e, params)
	if err != nil {
		return nil, err
	}
	return s.Generate(context.Background(), prompt, o.maxTokens, so)
}

func generate(o *options, stdout io.Writer) error {
	w, err := ddp.ReadWeights(o.checkpoint)
	if err != nil {
		return fileError{err}
	}
	if w.Config == nil {
		return fileError{fmt.Errorf("%s holds model %q, which is not a language model (it records no sizes): generate samples from gpt, gpt-tiny and gpt2 checkpoints", w.Path, w.Model)}
	}
	cfg, err := models.GPTConfigOf(w.Config)
	if err != nil {
		return fmt.Errorf("%s: %w", w.Path, err)
	}
	m, err := models.NewGPT(w.Model, cfg)
	if err != nil {
		return err
	}
	prompt, err := promptOf(o, cfg.Vocab)
	if err != nil {
		return usageError{err}
	}
	if len(prompt) > cfg.Context {
		return usageError{fmt.Errorf("the prompt has %d tokens, more than the model's context of %d: shorten it", len(prompt), cfg.Context)}
	}
	sample := models.SampleOptions{Temperature: o.temperature, TopK: o.topK, Seed: o.seed, Vocab: drawVocab(w.Model, cfg.Vocab)}
	var out []int32
	if o.device == "gpu" {
		out, err = generateOnDevice(o, w, m, prompt, sample)
	} else {
		out, err = generateOnCPU(o, w, m, prompt, sample)
	}
	if err != nil {
		return err
	}
	if cfg.Vocab <= 256 {
		fmt.Fprint(stdout, datasets.DecodeBytes(prompt), datasets.DecodeBytes(out), "\n")
		return nil
	}
	ids := make([]string, len(out))
	for i, t := range out {
		ids[i] = strconv.Itoa(int(t))
	}
	fmt.Fprintln(stdout, strings.Join(ids, ","))
	return nil
}

// promptOf turns the prompt flags into tokens.
func promptOf(o *options, vocab int) ([]int32, error) {
	if o.promptTokens != "" {
		var toks []int32
		for _, f := range strings.Split(o.promptTokens, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 0 || v >= vocab {
				return nil, fmt.Errorf("--prompt-tokens: %q is not a token id in [0, %d)", f, vocab)
			}
			toks = append(toks, int32(v))
		}
		return toks, nil
	}
	if vocab < 256 {
		return nil, fmt.Errorf("the model's vocabulary of %d is not byte-level: give --prompt-tokens", vocab)
	}
	if vocab > 256 {
		return nil, fmt.Errorf("the model's vocabulary has %d tokens (not bytes): give --prompt-tokens", vocab)
	}
	if o.prompt == "" {
		return nil, errors.New("--prompt is empty")
	}
	toks := make([]int32, len(o.prompt))
	for i := 0; i < len(o.prompt); i++ {
		toks[i] = int32(o.prompt[i])
	}
	return toks, nil
}
