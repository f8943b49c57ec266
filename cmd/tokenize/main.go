// Command tokenize encodes text files into llm.c token shards, so that data
// for a GPT-2 needs no Python:
//
//	tokenize --out data/go $(go env GOROOT)/src
//	train --model gpt2 --dataset llmc --train-shards 'data/go/src_train_*.bin' --val-shards 'data/go/src_val_*.bin'
//
// Each PATH is a text file or a directory read recursively, as train
// --dataset text reads one: files in sorted order, depth first; binary
// files (a NUL byte in the first 8 KiB), empty files and names starting
// with "." skipped, symbolic links followed. Each file is a document, led by GPT-2's
// <|endoftext|> (50256) as llm.c's data scripts lead every document. Every
// --val-every-th text file is validation data (with fewer files, the last
// 1/--val-every of the bytes). The files are encoded on all cores; the
// shards do not depend on the number of workers.
//
// The shards are llm.c's: a header of 256 little-endian int32 (magic
// 20240520, version 1, token count), then uint16 tokens, at most
// --shard-tokens each; the validation shards are numbered first:
// DIR/NAME_val_000000.bin, then DIR/NAME_train_000001.bin, ... A progress
// bar shows on a terminal. A bad flag or path is one line and exit status 2,
// checked before any file is read, and so is an input without a text file
// (after reading it); a failure during the work exits 1, and
// SIGINT or SIGTERM 130 or 143 (a second signal stops at once); either
// leaves no partial shard, nor an empty --out directory that it made, and
// the shards that --force replaces are deleted only once the new ones are
// complete.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/internal/outdir"
	"github.com/symddp/symddp/internal/stopsignal"
	"golang.org/x/term"
)

func main() { stopsignal.Main("tokenize", run) }

type options struct {
	out         string
	name        string
	tokenizer   string
	valEvery    int
	shardTokens int
	maxBytes    int64
	workers     int
	verify      bool
	force       bool
	paths       []string
}

// usageError is a bad command line or output directory (exit 2).
type usageError struct{ error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = tokenize(ctx, o, stdout, stderr)
	}
	if s, ok := stopsignal.Of(ctx); ok && err != nil {
		fmt.Fprintf(stderr, "tokenize: %v: no shard written; --out %s holds what it held before\n", s, o.out)
		return s.ExitCode()
	}
	if err != nil {
		msg := err.Error() // datasets.TokenizeText's errors start "tokenize: " already
		if !strings.HasPrefix(msg, "tokenize: ") {
			msg = "tokenize: " + msg
		}
		fmt.Fprintln(stderr, msg)
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, "Run 'tokenize --help' for the flags.")
			return 2
		}
		if errors.Is(err, datasets.ErrNoText) {
			return 2 // the input named holds nothing to tokenize, as train says of it
		}
		return 1
	}
	return 0
}

const usage = `tokenize: encode text files into llm.c token shards for train --dataset llmc.

Usage:
  tokenize --out DIR [flags] PATH...

PATH is a text file or a directory read recursively, as train --dataset text
reads one (binary files and dotfiles skipped, symbolic links followed). Each file is
a document led by <|endoftext|>; every --val-every-th file is validation
data. Shards: DIR/NAME_val_000000.bin, DIR/NAME_train_000001.bin, ...

Flags:
`

func parse(args []string, stdout io.Writer) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("tokenize", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.out, "out", "", "directory to write the shards into (made if missing)")
	fs.StringVar(&o.name, "name", "", "first part of the shards' names (default: the first PATH's name without its extension)")
	fs.StringVar(&o.tokenizer, "tokenizer", datasets.GPT2Tokenizer, "gpt2 (GPT-2's BPE, vocabulary 50257) or byte (vocabulary 256, no <|endoftext|>)")
	fs.IntVar(&o.valEvery, "val-every", datasets.DefaultValEvery, "every k-th text file is validation data")
	fs.IntVar(&o.shardTokens, "shard-tokens", 100_000_000, "tokens per shard at most (llm.c's fineweb script writes 10^8)")
	fs.Int64Var(&o.maxBytes, "max-bytes", 0, "read only the first N bytes of text in file order (0: all)")
	fs.IntVar(&o.workers, "workers", 0, "goroutines that encode (0: one per core)")
	fs.BoolVar(&o.verify, "verify", false, "decode every document and compare it with its file")
	fs.BoolVar(&o.force, "force", false, "replace the shards named NAME that DIR already holds (deleted once the new shards are complete)")
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	if *help {
		fmt.Fprint(stdout, usage, fs.FlagUsages())
		return nil, pflag.ErrHelp
	}
	o.paths = fs.Args()
	switch {
	case o.out == "":
		return nil, usageError{errors.New("--out is required: the directory to write the shards into")}
	case len(o.paths) == 0:
		return nil, usageError{errors.New("name at least one text file or directory, e.g. $(go env GOROOT)/src")}
	case o.tokenizer != datasets.GPT2Tokenizer && o.tokenizer != datasets.ByteTokenizer:
		return nil, usageError{fmt.Errorf("--tokenizer %q: want gpt2 or byte", o.tokenizer)}
	case o.valEvery < 2:
		return nil, usageError{fmt.Errorf("--val-every %d: want 2 or more", o.valEvery)}
	case o.shardTokens < 1 || o.shardTokens > 1<<31-1:
		return nil, usageError{fmt.Errorf("--shard-tokens %d: want 1 to 2147483647 (the header counts in an int32)", o.shardTokens)}
	case o.maxBytes < 0:
		return nil, usageError{fmt.Errorf("--max-bytes %d: must be 0 (all) or positive", o.maxBytes)}
	case o.workers < 0:
		return nil, usageError{fmt.Errorf("--workers %d: must be 0 (one per core) or positive", o.workers)}
	}
	if o.name == "" {
		o.name = defaultName(o.paths[0])
	}
	if strings.ContainsAny(o.name, `/\`) || strings.HasPrefix(o.name, ".") {
		return nil, usageError{fmt.Errorf("--name %q: want a plain file name, not starting with '.'", o.name)}
	}
	return o, nil
}

// defaultName is a path's base name without its extension, or "text".
func defaultName(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "text"
	}
	base := filepath.Base(abs)
	if ext := filepath.Ext(base); ext != base {
		base = strings.TrimSuffix(base, ext)
	}
	if base == "" || base == "." || base == string(filepath.Separator) || strings.HasPrefix(base, ".") {
		return "text"
	}
	return base
}

// prepareOut checks the paths and the output directory before any work:
// the directory is made if missing and must take a file, and must not hold
// shards of this name already, unless --force: it returns them then, for
// tokenize to delete once the new shards are in place.
func prepareOut(o *options) (old []string, err error) {
	for _, p := range o.paths {
		if _, err := os.Stat(p); err != nil {
			return nil, usageError{fmt.Errorf("PATH %w", unwrapPath(err, p))}
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, usageError{fmt.Errorf("--out %w", unwrapPath(err, o.out))}
	}
	probe, err := os.CreateTemp(o.out, ".tokenize-probe-*")
	if err != nil {
		return nil, usageError{fmt.Errorf("--out %s: cannot write there: %w", o.out, errors.Unwrap(err))}
	}
	probe.Close()
	os.Remove(probe.Name())
	for _, split := range []string{"train", "val"} {
		m, _ := filepath.Glob(filepath.Join(o.out, o.name+"_"+split+"_*.bin"))
		old = append(old, m...)
	}
	if len(old) > 0 && !o.force {
		return nil, usageError{fmt.Errorf("--out %s already holds %d shards named %s_train_*/%s_val_* (%s, ...): delete them, pass --force, or choose another --name",
			o.out, len(old), o.name, o.name, filepath.Base(old[0]))}
	}
	return old, nil
}

// unwrapPath turns an *os.PathError into "path: reason".
func unwrapPath(err error, path string) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", path, pe.Err)
	}
	return err
}

// tokenize writes the shards into --out. --out is made if missing; when
// tokenizing fails, the directories it made are removed again while they
// are empty (no partial shard is left), so that an empty input leaves no
// trace.
func tokenize(ctx context.Context, o *options, stdout, stderr io.Writer) (err error) {
	tok, err := datasets.NewTokenizer(o.tokenizer)
	if err != nil {
		return usageError{err}
	}
	made := outdir.Of(o.out)
	defer func() {
		if err != nil {
			made.RemoveEmpty()
		}
	}()
	old, err := prepareOut(o)
	if err != nil {
		return err
	}
	w, err := datasets.NewShardWriter(o.out, o.name, o.shardTokens, tok.Vocab())
	if err != nil {
		return err
	}
	workers := o.workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var bar *progressbar.ProgressBar
	start := time.Now()
	info, err := datasets.TokenizeText(o.paths, datasets.TokenizeOptions{
		TextOptions: datasets.TextOptions{Tokenizer: tok, ValEvery: o.valEvery, MaxBytes: o.maxBytes},
		Workers:     workers,
		Verify:      o.verify,
		Progress: func(done, total int64) {
			if bar == nil && done == 0 && isTerminal(stderr) {
				bar = progressbar.NewOptions64(total,
					progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription("tokenize"),
					progressbar.OptionShowBytes(true),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionClearOnFinish())
			}
			if bar != nil {
				_ = bar.Set64(done)
			}
		},
	}, func(val bool, tokens []int32) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return w.Write(val, tokens)
	})
	if bar != nil {
		_ = bar.Finish()
	}
	if err == nil && ctx.Err() != nil { // a signal after the last document
		err = context.Cause(ctx)
	}
	if err != nil {
		w.Abort()
		return err
	}
	paths, err := w.Close()
	if err != nil {
		return err
	}
	for _, f := range old { // --force: the shards the new ones did not replace
		if !slices.Contains(paths, f) {
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("--force: %w", err)
			}
		}
	}
	report(stdout, o, tok, info, paths, workers, time.Since(start))
	return nil
}

// report prints what was read and written. With fewer text files than
// --val-every the parts are split by bytes, not files (CorpusInfo's
// TrainFiles and ValFiles are 0 then): the lines say so.
func report(out io.Writer, o *options, tok datasets.Tokenizer, info datasets.CorpusInfo, paths []string, workers int, took time.Duration) {
	bytes := info.TrainBytes + info.ValBytes
	fmt.Fprintf(out, "read %s (%d binary skipped), %.1f MB, of %s\n", textFiles(info.Files), info.Binary, float64(bytes)/1e6, strings.Join(o.paths, " "))
	if info.ValFiles == 0 {
		fmt.Fprintf(out, "validation: %s: %d bytes, %d tokens\n", info.Split, info.ValBytes, info.ValTokens)
		fmt.Fprintf(out, "training: the first %d bytes (of %s, split by bytes), %d tokens\n", info.TrainBytes, textFiles(info.Files), info.TrainTokens)
	} else {
		fmt.Fprintf(out, "validation: %s; %s, %d bytes, %d tokens\n", info.Split, textFiles(info.ValFiles), info.ValBytes, info.ValTokens)
		fmt.Fprintf(out, "training: %s, %d bytes, %d tokens\n", textFiles(info.TrainFiles), info.TrainBytes, info.TrainTokens)
	}
	for _, p := range paths {
		fmt.Fprintln(out, "wrote", p)
	}
	check := ""
	if o.verify {
		check = ", every document decoded back to its file"
	}
	fmt.Fprintf(out, "%s tokens (%.2f bytes per token) in %.1f s on %d workers: %.2f MB/s%s\n",
		tok.Name(), float64(bytes)/float64(max(info.TrainTokens+info.ValTokens, 1)), took.Seconds(), workers, float64(bytes)/1e6/took.Seconds(), check)
}

// textFiles is "1 text file" or "n text files".
func textFiles(n int) string {
	if n == 1 {
		return "1 text file"
	}
	return fmt.Sprintf("%d text files", n)
}

// isTerminal reports whether w is a terminal (the progress bar only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
