// Command export writes a language-model checkpoint of train in Hugging
// Face's layout, for transformers, PyTorch or any safetensors reader:
//
//	export --checkpoint ckpt --out hf-dir [--dtype bf16]
//
// It reads the newest valid checkpoint of a directory (or the file named)
// and writes model.safetensors and config.json into --out: a GPT as
// GPT2LMHeadModel (the parameters as "transformer.<GPT-2 name>", the
// blocks' matrices transposed to Conv1D's layout, no lm_head: it is tied
// to wte; docs/GPT.md), a Llama as LlamaForCausalLM (the parameters under
// their own names, which are Hugging Face's, lm_head only when untied;
// docs/LLAMA.md). The vocabulary is cut back to GPT-2's 50257 tokens for a
// model with the gpt2 presets' padded 50304. train --init-from reads such
// a directory back.
//
// A bad command line or checkpoint exits 2, a failure to write --out 1;
// either leaves --out as it was: both files are written to temporary files
// first, then renamed into place. So does SIGINT or SIGTERM, which exits
// 130 or 143 (a second signal stops at once).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/internal/outdir"
	"github.com/symddp/symddp/internal/stopsignal"
)

func main() { stopsignal.Main("export", run) }

type options struct {
	checkpoint string
	out        string
	dtype      string
	vocab      int
	overwrite  bool
}

// usageError is a bad command line or input (exit 2).
type usageError struct{ error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = export(ctx, o, stdout, stderr)
	}
	if s, ok := stopsignal.Of(ctx); ok && err != nil {
		fmt.Fprintf(stderr, "export: %v: --out %s is as it was (nothing of this export written)\n", s, o.out)
		return s.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(stderr, "export:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

func parse(args []string, stdout io.Writer) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("export", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.checkpoint, "checkpoint", "", "checkpoint file, or a --checkpoint-dir of train (its newest valid checkpoint)")
	fs.StringVar(&o.out, "out", "", "directory to write model.safetensors and config.json into (created if missing)")
	fs.StringVar(&o.dtype, "dtype", "f32", "type of the tensors written: f32, or bf16 (half the size, each value rounded to nearest even)")
	fs.IntVar(&o.vocab, "vocab", 0, "vocabulary rows to write (of the embedding, and of an untied head), config.json's vocab_size (0: GPT-2's 50257 for a model with the gpt2 presets' 50304 rows, else all)")
	fs.BoolVar(&o.overwrite, "overwrite", false, "replace the model.safetensors and config.json that --out already holds")
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	if *help {
		fmt.Fprint(stdout, "export: write a checkpoint of train in Hugging Face's layout: a GPT as GPT2LMHeadModel, a Llama as LlamaForCausalLM.\n\nUsage:\n  export --checkpoint DIR|FILE --out DIR [flags]\n\nFlags:\n")
		fmt.Fprint(stdout, fs.FlagUsages())
		return nil, pflag.ErrHelp
	}
	switch {
	case fs.NArg() > 0:
		return nil, usageError{fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))}
	case o.checkpoint == "":
		return nil, usageError{errors.New("--checkpoint is required: a checkpoint file or directory written by train --checkpoint-dir")}
	case o.out == "":
		return nil, usageError{errors.New("--out is required: the directory to write model.safetensors and config.json into")}
	case o.dtype != "f32" && o.dtype != "bf16":
		return nil, usageError{fmt.Errorf("--dtype %q: want f32 or bf16", o.dtype)}
	case o.vocab < 0:
		return nil, usageError{fmt.Errorf("--vocab %d: must not be negative", o.vocab)}
	}
	return o, nil
}

// export writes the checkpoint into --out. --out is made if missing; when
// the export fails, the directories it made are removed again while they
// are empty, so that a bad checkpoint leaves no trace.
func export(ctx context.Context, o *options, stdout, stderr io.Writer) (err error) {
	if _, err := os.Stat(o.checkpoint); err != nil {
		return usageError{fmt.Errorf("--checkpoint %s: %w (a checkpoint file, or a --checkpoint-dir of train)", o.checkpoint, errors.Unwrap(err))}
	}
	made := outdir.Of(o.out)
	defer func() {
		if err != nil {
			made.RemoveEmpty()
		}
	}()
	if err := ddp.CheckExportDir(o.out, o.overwrite); err != nil {
		var exists *ddp.ExportExistsError
		if errors.As(err, &exists) {
			return usageError{fmt.Errorf("--out %s already holds %s: pass --overwrite to replace the export there, or choose another --out", exists.Dir, exists.File)}
		}
		return usageError{fmt.Errorf("--out: %w", err)}
	}
	w, err := ddp.ReadWeights(o.checkpoint)
	if err != nil {
		return usageError{err}
	}
	if warn := w.Warning(); warn != "" {
		fmt.Fprintln(stderr, "export: warning:", warn)
	}
	res, err := ddp.ExportHFContext(ctx, w, o.out, ddp.HFExportOptions{DType: strings.ToUpper(o.dtype), Vocab: o.vocab, Overwrite: o.overwrite})
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	switch {
	case errors.As(err, &pathErr) || errors.As(err, &linkErr):
		return err // the checkpoint was fine: writing --out failed
	case err != nil:
		return usageError{err} // not a GPT, a --vocab it does not have
	}
	c := res.Config
	heads := fmt.Sprintf("%d heads", c["heads"])
	if kv, ok := c["kv_heads"]; ok {
		heads += fmt.Sprintf(" (%d key/value)", kv)
	}
	fmt.Fprintf(stdout, "wrote %s/model.safetensors (%d tensors, %s, %.1f MiB) and config.json: model %s of step %d, %d layers, %s, width %d, context %d, vocabulary %d",
		res.Dir, res.Tensors, strings.ToLower(res.DType), float64(res.Bytes)/(1<<20), res.Model, w.Step, c["layers"], heads, c["width"], c["context"], res.Vocab)
	if res.Vocab != c["vocab"] {
		fmt.Fprintf(stdout, " (of %d rows)", c["vocab"])
	}
	fmt.Fprintln(stdout)
	return nil
}
