// Command generate samples text from a language model that train wrote a
// checkpoint of:
//
//	generate --checkpoint ckpt --prompt 'func main() {' --max-tokens 200
//
// It reads the newest valid checkpoint of a directory (or the file named),
// rebuilds the model from the sizes the checkpoint records, and continues
// the prompt one token at a time on one PE (the CPU engine, or the CUDA one
// with --device gpu), with --temperature, --top-k and --seed. The prompt is
// text and so is the sample, through the model's tokenizer (--tokenizer
// auto): bytes for a byte-level model (vocabulary 256); GPT-2's BPE for a
// model with GPT-2's vocabulary (50257, or the gpt2 preset's 50304, trained
// on llm.c shards or tokenized text), whose prompt follows <|endoftext|>,
// as every document of such data does, and whose sample is drawn from the
// 50257 real tokens only:
//
//	generate --checkpoint ckpt --prompt 'The dog' --max-tokens 50
//
// --prompt-tokens gives the prompt as token ids instead; --tokenizer none
// prints the sample as token ids. The sample is printed as it is drawn
// (a character whose bytes span tokens once its last byte is in); SIGINT or
// SIGTERM stops between two tokens, leaves what was drawn on the screen and
// exits 130 or 143.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/pflag"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/internal/floatflag"
	"github.com/symddp/symddp/internal/stopsignal"
	"github.com/symddp/symddp/models"
)

func main() { stopsignal.Main("generate", run) }

type options struct {
	checkpoint   string
	prompt       string
	promptSet    bool // --prompt was given
	promptTokens string
	tokenizer    string // auto, byte, gpt2 or none
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = generate(ctx, o, stdout, stderr)
	}
	if s, ok := stopsignal.Of(ctx); ok && err != nil {
		fmt.Fprintf(stderr, "generate: %v\n", err)
		return s.ExitCode()
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
	fs.StringVar(&o.prompt, "prompt", "", "text to continue (default: a newline for a byte-level model, a new document for GPT-2's vocabulary)")
	fs.StringVar(&o.promptTokens, "prompt-tokens", "", "token ids to continue, comma-separated, instead of --prompt")
	fs.StringVar(&o.tokenizer, "tokenizer", "auto", "auto (byte for a vocabulary of 256, gpt2 for 50257 to 50304, else none), byte, gpt2, or none: token ids out")
	fs.IntVar(&o.maxTokens, "max-tokens", 200, "tokens to generate")
	fs.Float64Var(&o.temperature, "temperature", 0.8, "sampling temperature (0: always the most likely token)")
	fs.IntVar(&o.topK, "top-k", 40, "draw from the K most likely tokens only (0: all)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the draws")
	fs.StringVar(&o.device, "device", "cpu", "cpu, or gpu: the CUDA engine (the model's layers run in bf16 where they can; needs libsymddp_cuda.so, see --gpu-lib)")
	fs.StringVar(&o.gpuLib, "gpu-lib", "", "path of libsymddp_cuda.so for --device gpu (default: SYMDDP_CUDA_LIB, next to the binary, or ./build)")
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	o.promptSet = fs.Changed("prompt")
	if *help {
		fmt.Fprint(stdout, "generate: sample from a language model checkpoint written by train.\n\nUsage:\n  generate --checkpoint DIR|FILE [--prompt TEXT] [flags]\n\nFlags:\n")
		fmt.Fprint(stdout, fs.FlagUsages())
		return nil, pflag.ErrHelp
	}
	if err := floatflag.CheckFinite(fs); err != nil {
		return nil, usageError{err}
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
	case !slices.Contains([]string{"auto", "byte", "gpt2", "none"}, o.tokenizer):
		return nil, usageError{fmt.Errorf("--tokenizer %q: want auto, byte, gpt2 or none", o.tokenizer)}
	}
	return o, nil
}

// newGPUEngine makes --device gpu's engine (tests put an emulated one in).
var newGPUEngine = func(lib string) (compute.Engine, error) { return cuda.New(cuda.Options{LibPath: lib}) }

// drawFunc draws n tokens after prompt from a model built and loaded on
// its engine.
type drawFunc func(ctx context.Context, prompt []int32, n int, so models.SampleOptions) ([]int32, error)

// onCPU builds m on the CPU engine over host arenas holding w's values.
func onCPU(w *ddp.Weights, m models.LanguageModel) (drawFunc, func(), error) {
	e, err := cpu.New(cpu.Options{Threads: 0})
	if err != nil {
		return nil, nil, err
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
		return nil, nil, err
	}
	if err := models.LoadParams(e, specs, pv, w.Read); err != nil {
		return nil, nil, err
	}
	return m.Generate, func() {}, nil
}

// onDevice builds m on the CUDA engine: w's values in device memory, the
// model's layers in bf16 where they can (models.NewSampler). done closes
// the engine.
func onDevice(o *options, w *ddp.Weights, m models.LanguageModel) (_ drawFunc, done func(), err error) {
	e, err := newGPUEngine(o.gpuLib)
	if err != nil {
		return nil, nil, fmt.Errorf("--device gpu: %w", err)
	}
	done = func() {}
	if c, ok := e.(interface{ Close() error }); ok {
		done = func() { c.Close() }
	}
	defer func() {
		if err != nil {
			done()
		}
	}()
	specs := m.Params()
	offsets, n := models.Layout(specs)
	params := make([]float32, n)
	for i, s := range specs {
		if err := w.Read(s.Name, params[offsets[i]:offsets[i]+s.Size()]); err != nil {
			return nil, nil, err
		}
	}
	s, err := models.NewSampler(m, e, params)
	if err != nil {
		return nil, nil, err
	}
	return s.Generate, done, nil
}

func generate(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	if _, err := os.Stat(o.checkpoint); err != nil {
		return fileError{fmt.Errorf("--checkpoint %s: %w (a checkpoint file, or a --checkpoint-dir of train)", o.checkpoint, errors.Unwrap(err))}
	}
	w, err := ddp.ReadWeights(o.checkpoint)
	if err != nil {
		return fileError{err}
	}
	if warn := w.Warning(); warn != "" {
		fmt.Fprintln(stderr, "generate: warning:", warn)
	}
	if w.Config == nil {
		return fileError{fmt.Errorf("%s holds model %q, which is not a language model (it records no sizes): generate samples from the gpt and llama models' checkpoints", w.Path, w.Model)}
	}
	m, err := models.LanguageModelOf(w.Model, w.Config)
	if err != nil {
		return fmt.Errorf("%s: %w", w.Path, err)
	}
	if err := w.Holds(m.Params()); err != nil {
		return fileError{fmt.Errorf("%s: %v, built from the sizes its metadata records (%v): the metadata does not match the tensors", w.Path, err, w.Config)}
	}
	spec := m.Data()
	cfg := struct{ Vocab, Context int }{spec.Classes, spec.Input[0]}
	tok, err := chooseTokenizer(o.tokenizer, cfg.Vocab)
	if err != nil {
		return usageError{err}
	}
	prompt, shown, err := promptOf(o, tok, cfg.Vocab)
	if err != nil {
		return usageError{err}
	}
	if len(prompt) > cfg.Context {
		return usageError{fmt.Errorf("the prompt has %d tokens, more than the model's context of %d: shorten it", len(prompt), cfg.Context)}
	}
	// The model built and loaded first (an engine that cannot start
	// writes nothing to stdout), then the prompt, then the sample as it
	// is drawn (a signal stops between two tokens: what was drawn stays).
	var draw drawFunc
	var done func()
	if o.device == "gpu" {
		draw, done, err = onDevice(o, w, m)
	} else {
		draw, done, err = onCPU(w, m)
	}
	if err != nil {
		return err
	}
	defer done()
	if _, err := io.WriteString(stdout, shown); err != nil {
		return err
	}
	st := &streamer{w: stdout, tok: tok}
	sample := models.SampleOptions{Temperature: o.temperature, TopK: o.topK, Seed: o.seed, Vocab: drawVocab(tok, cfg.Vocab), Emit: st.emit}
	_, err = draw(ctx, prompt, o.maxTokens, sample)
	if shown != "" || st.n > 0 || err == nil { // end the line begun
		if ferr := st.finish(); err == nil {
			err = ferr
		}
	}
	if s, ok := stopsignal.Of(ctx); ok && err != nil {
		return fmt.Errorf("%v after %d of %d tokens", s, st.n, o.maxTokens)
	}
	return err
}
