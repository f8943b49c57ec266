package traincmd

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// chooseTokenData decides a language model's data in the launcher: the
// model's context and vocabulary, and a text corpus (a file or directory,
// Go's source tree by default) or llm.c token shards, checked here so that a
// bad path, shard header or token is one line before any PE starts.
func chooseTokenData(o *options) (dataChoice, error) {
	m, err := models.New(o.model, o.modelConfig())
	if err != nil {
		return dataChoice{}, usageError{err: err}
	}
	spec := m.Data()
	dc := dataChoice{name: o.dataset, context: spec.Input[0], vocab: spec.Classes}
	if err := checkMemory(o, m, spec.Input[0]); err != nil {
		return dataChoice{}, err
	}
	switch o.dataset {
	case "text":
		name, err := textTokenizer(o, dc.vocab)
		if err != nil {
			return dataChoice{}, err
		}
		dc.tokenizer = name
		dc.dir = o.dataDir
		if dc.dir == "" {
			d, err := datasets.DefaultTextDir()
			if err != nil {
				return dataChoice{}, inputf("--dataset text: %v", err)
			}
			dc.dir = d
		}
		if _, err := os.Stat(dc.dir); err != nil {
			return dataChoice{}, inputf("--data-dir %s: %v", dc.dir, err)
		}
		n, err := parseBytes("--corpus-max", o.corpusMax, true)
		if err != nil {
			return dataChoice{}, err
		}
		dc.maxBytes = n
		if err := buildCorpus(&dc); err != nil {
			return dataChoice{}, inputErr(err)
		}
	case "llmc":
		if o.trainShards == "" || o.valShards == "" {
			return dataChoice{}, usagef("--dataset llmc needs --train-shards and --val-shards (globs of llm.c .bin token shards)")
		}
		dc.trainGlob, dc.valGlob = o.trainShards, o.valShards
		if proc.Role == launch.LocalPE {
			break // the launcher checked every token before it started this PE
		}
		tr, va, err := datasets.LoadShards(dc.trainGlob, dc.valGlob, dc.context, dc.vocab)
		if err != nil {
			return dataChoice{}, inputErr(shardVocabHint(err, o.model))
		}
		// the launcher, or rank 0 under mpirun, says what the windows leave out
		if w := unreadWarning(tr); w != "" && sayOnce() {
			fmt.Fprintln(os.Stderr, w)
		}
		tr.Close()
		va.Close()
	case "synthetic": // checkDataFlags refused the flags it does not read
	default:
		return dataChoice{}, usagef("--dataset %s: model %s is a language model: use --dataset text, llmc or synthetic", o.dataset, o.model)
	}
	return dc, nil
}

// sayOnce reports whether this process speaks for the job about its data:
// the launcher, or rank 0 under mpirun (a PE our launcher started finds
// what the launcher already said).
func sayOnce() bool {
	return proc.Role == launch.Starter || proc.Role == launch.MPIRank && proc.MPI.Rank == 0
}

// unreadWarning says how much of the training shards no window reads when
// that is more than 5% of their tokens (shards not much longer than the
// context), "" otherwise.
func unreadWarning(tr *datasets.TokenSource) string {
	n := tr.Unread()
	if n*20 <= tr.Tokens() {
		return ""
	}
	return fmt.Sprintf("warning: --train-shards: windows of %d tokens leave out %d of the shards' %d tokens (%.0f%%): the end of each shard shorter than a window is not read; shards of many more tokens than the context (tokenize --shard-tokens) lose less",
		tr.Context()+1, n, tr.Tokens(), 100*float64(n)/float64(tr.Tokens()))
}

// textTokenizer is --tokenizer for a model of vocab tokens: auto is
// datasets.TokenizerForVocab's choice (gpt2 for the gpt2 family), byte for a
// vocabulary it does not know; a tokenizer whose ids the model cannot take
// is a usage error.
func textTokenizer(o *options, vocab int) (string, error) {
	name := o.tokenizer
	if name == "auto" {
		if name = datasets.TokenizerForVocab(vocab); name == "" {
			name = datasets.ByteTokenizer // any vocabulary of 256 or more takes bytes
		}
	}
	tok, err := datasets.NewTokenizer(name)
	if err != nil {
		return "", usagef("--tokenizer %q: want auto, %s", o.tokenizer, strings.Join(datasets.TokenizerNames, " or "))
	}
	if vocab < tok.Vocab() {
		which := name
		if o.tokenizer == "auto" {
			which += " (auto's choice)"
		}
		return "", usagef("--dataset text with --tokenizer %s has %d tokens but model %s a vocabulary of %d: use %s--vocab %d or more",
			which, tok.Vocab(), o.model, vocab, otherTokenizer(name, vocab), tok.Vocab())
	}
	return name, nil
}

// otherTokenizer is "--tokenizer T, or " for the first tokenizer other than
// name whose ids fit a vocabulary of vocab tokens, "" when there is none.
func otherTokenizer(name string, vocab int) string {
	for _, n := range datasets.TokenizerNames {
		if t, err := datasets.NewTokenizer(n); err == nil && n != name && t.Vocab() <= vocab {
			return "--tokenizer " + n + ", or "
		}
	}
	return ""
}

// Synthetic token data (--dataset synthetic for a language model): windows of
// one pseudo-random stream of the seed, computed as batches are gathered
// (datasets.SyntheticTokens), enough of them for 4096 steps of 16 sequences
// per epoch, and the validation windows that follow.
const (
	syntheticTokenWindows    = 1 << 16
	syntheticTokenValWindows = 1024
)

// loadTokenData loads a language model's training and validation windows on
// one PE: the corpus file that chooseTokenData built, or the shards, both
// memory-mapped, so the PEs of a host share one copy of the pages; or
// synthetic windows, which need no memory.
func loadTokenData(dc dataChoice, seed uint64) (train, val datasets.Source, err error) {
	if dc.name == "synthetic" {
		tr, va, err := datasets.SyntheticTokenSplit(syntheticTokenWindows, syntheticTokenValWindows, dc.context, dc.vocab, seed)
		if err != nil {
			return nil, nil, err
		}
		return tr, va, nil
	}
	if dc.name == "llmc" {
		// chooseTokenData scanned every token, in this process or in the
		// launcher: the headers and sizes are checked again, the tokens not
		tr, va, err := datasets.LoadCheckedShards(dc.trainGlob, dc.valGlob, dc.context, dc.vocab)
		if err != nil {
			return nil, nil, err
		}
		return tr, va, nil
	}
	tr, va, err := datasets.LoadCorpus(dc.corpus, dc.context)
	if err != nil {
		return nil, nil, err
	}
	return tr, va, nil
}

// buildCorpus makes (or finds up to date) the corpus file of dc's text, in
// the user's cache directory ($XDG_CACHE_HOME/symddp, ~/.cache/symddp; the
// temporary directory when there is none), named by the source and the
// cap, and checks that both its parts hold a window of dc.context tokens.
// The launcher builds it before any PE starts, so a text problem is one line
// naming the user's path; each PE then finds it current (a listing of the
// source, about 50 ms for Go's tree) and maps it. Runs after the first reuse
// it: Go's whole tree took 1.5 s to build here.
func buildCorpus(dc *dataChoice) error {
	abs, err := filepath.Abs(dc.dir)
	if err != nil {
		return err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "symddp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		dir = os.TempDir()
	}
	key := fmt.Sprintf("%s\x00%d", abs, dc.maxBytes)
	opts := datasets.TextOptions{MaxBytes: dc.maxBytes}
	byteLevel := dc.tokenizer == "" || dc.tokenizer == datasets.ByteTokenizer
	if !byteLevel {
		key += "\x00" + dc.tokenizer // byte corpora keep their names of before
		if opts.Tokenizer, err = datasets.NewTokenizer(dc.tokenizer); err != nil {
			return err
		}
	}
	h := sha256.Sum256([]byte(key))
	dc.corpus = filepath.Join(dir, fmt.Sprintf("text-%x.bin", h[:8]))
	// the launcher, or rank 0 under mpirun, says what takes a while; a PE
	// our launcher started finds the file current
	say := sayOnce()
	if _, err := os.Stat(dc.corpus); err != nil && say {
		if byteLevel {
			fmt.Fprintf(os.Stderr, "reading the text files of %s into one corpus file, once (cached in %s)\n", dc.dir, dir)
		} else {
			fmt.Fprintf(os.Stderr, "tokenizing %s with %s's BPE once (cached in %s; Go's source tree takes a minute or two on 2 cores)\n", dc.dir, dc.tokenizer, dir)
		}
	}
	start := time.Now()
	info, err := datasets.BuildCorpus(dc.corpus, dc.dir, opts)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("--dataset text from %s: %w (the corpus is cached in %s: make room there, or point XDG_CACHE_HOME at another directory)", dc.dir, err, dir)
	}
	if err != nil {
		return fmt.Errorf("--dataset text from %s: %w", dc.dir, err)
	}
	if info.Built && say {
		tokens := ""
		if !byteLevel {
			tokens = fmt.Sprintf(" (%d and %d %s tokens)", info.TrainTokens, info.ValTokens, dc.tokenizer)
		}
		fmt.Fprintf(os.Stderr, "corpus of %s: %s (%d binary skipped), %.1f MB for training and %.1f MB for validation%s, written in %.1fs to %s\n",
			dc.dir, plural(info.Files, "text file"), info.Binary, float64(info.TrainBytes)/1e6, float64(info.ValBytes)/1e6,
			tokens, time.Since(start).Seconds(), dc.corpus)
	}
	tr, va, err := datasets.LoadCorpus(dc.corpus, dc.context)
	if err != nil {
		return fmt.Errorf("--dataset text from %s (%s, %d training and %d validation bytes; --corpus-max, --context): %w",
			dc.dir, plural(info.Files, "text file"), info.TrainBytes, info.ValBytes, errors.Unwrap(err))
	}
	tr.Close()
	va.Close()
	return nil
}

// checkMemory refuses, before any PE starts, a language-model run on the
// CPU whose PEs need more memory than the host has available, which would
// otherwise swap or be killed part-way: each PE's activations
// (models.ActivationSizer, for its micro-batch), its fp32 weights,
// gradients and optimizer state (models.FootprintOf, with the optimizer's
// state slots) and the program, summed over the host's PEs (each part
// alone could fit where their sum does not). On the GPU (--backend
// nvshmem) these are in device memory, not the host's: the engine says
// when they do not fit.
func checkMemory(o *options, m models.Model, context int) error {
	if o.backend == "nvshmem" {
		return nil
	}
	micro := o.batch / (o.pes * o.accumulate)
	avail := memAvailable()
	if micro < 1 || avail <= 0 {
		return nil // the batch check reports it; no /proc/meminfo: no check
	}
	slots := 2
	if opt, err := optim.New(o.recipe.Optimizer, o.recipe.Hyper); err == nil {
		slots = opt.Slots()
	}
	f := models.FootprintOf(m, micro, slots)
	act := max(0, f.ActivationBytes)
	per := act + f.ArenaBytes + peRuntime
	need := per * int64(o.pes)
	if need <= avail {
		return nil
	}
	hints := "split the batch with --accumulate, or use a smaller --batch-size or --context"
	if _, ok := m.(models.Recomputer); ok && o.recipe.Recompute != models.RecomputeBlock {
		hints = "split the batch with --accumulate, recompute activations with --recompute block, or use a smaller --batch-size or --context"
	}
	if act < f.ArenaBytes {
		hints = "use a smaller model (--layers, --width) or fewer --pes"
	}
	return usagef("model %s at %d sequences of %d tokens per PE needs about %.1f GiB per PE (%.1f GiB of activations, %.1f GiB of weights, gradients and optimizer state, and the program; %.1f GiB for %s), more than the %.1f GiB this host has available: %s",
		o.model, micro, context, gib(per), gib(act), gib(f.ArenaBytes), gib(need), plural(o.pes, "PE"), gib(avail), hints)
}

// checkModelScale refuses, before the model is built, a language model
// whose --layers make its fp32 weights, gradients and two optimizer state
// slots alone larger than this host's available memory: building a model
// of a million layers takes gigabytes and seconds before any other check
// could say so. It builds the model at 1 and 2 layers and extrapolates
// (a decoder's layers are alike). The GPU backend keeps these on the GPU
// (checked when the PEs build the model there).
func (o *options) checkModelScale() error {
	if !o.languageModel || !o.set("layers") || o.layers <= 2 || o.backend == "nvshmem" {
		return nil
	}
	arenas := func(layers int) (int64, bool) {
		cfg := o.modelConfig()
		cfg.Layers, cfg.Recompute = layers, models.RecomputeNone
		m, err := models.New(o.model, cfg)
		if err != nil {
			return 0, false // reported where the model is built
		}
		return models.FootprintOf(m, 1, 2).ArenaBytes, true
	}
	one, ok1 := arenas(1)
	two, ok2 := arenas(2)
	avail := memAvailable()
	if !ok1 || !ok2 || avail <= 0 {
		return nil
	}
	per := float64(one) + float64(o.layers-1)*float64(two-one)
	if need := per * float64(o.pes); need > float64(avail) {
		return usagef("--layers %d: model %s's weights, gradients and optimizer state would take about %.1f GiB per PE (%.1f GiB for %s), more than the %.1f GiB this host has available: use fewer --layers (about %d fit) or a smaller --width",
			o.layers, o.model, per/(1<<30), need/(1<<30), plural(o.pes, "PE"), gib(avail), 1+int64((float64(avail)/float64(o.pes)-float64(one))/float64(max(1, two-one))))
	}
	return nil
}

// peRuntime is what a shm PE's process takes besides its symmetric heap and
// its data (the Go runtime, the engine's buffers): about 20 MB of an mlp
// PE's resident memory (84 MB on Fashion-MNIST, 246 MB on the synthetic
// data, 9 MiB of heap; 2026-12-07, this repository's CI host).
const peRuntime = 16 << 20

// dataBytes is about what each PE holds of the data in its own memory: the
// built-in image sets are loaded by every PE (synthetic as fp32, 70,000
// samples of 784; the IDX sets as bytes); token data is a mapped file
// that the PEs share, and a registered dataset's size is not known here.
func (dc dataChoice) dataBytes() int64 {
	switch {
	case dc.loader != nil || dc.vocab > 0:
		return 0
	case dc.name == "synthetic":
		return 70000 * (784 + 1) * 4
	default:
		return 70000 * (784 + 1)
	}
}

// checkPEMemory refuses a shm run whose PEs cannot all fit this host's
// available memory, each with heap bytes of symmetric heap, its copy of the
// data and peRuntime: a thousand PEs would otherwise start, swap and be
// killed by the kernel's out-of-memory killer, taking other processes with
// them. Where not even one PE fits, fewer PEs are no answer: a --heap-size
// larger than the host is (the heap the model needs, when it is smaller),
// else the model.
func checkPEMemory(o *options, heap int64, dc dataChoice) error {
	avail := memAvailable()
	if avail <= 0 || o.pes < 2 {
		return nil
	}
	each := heap + dc.dataBytes() + peRuntime
	need := each * int64(o.pes)
	if need <= avail {
		return nil
	}
	hint := fmt.Sprintf("use --pes %d or fewer", avail/each)
	if avail < each {
		hint = "not even one PE fits: use a smaller model"
		if m, err := modelHeap(o, "shm"); o.heapSize != "" && err == nil && m < heap {
			hint = fmt.Sprintf("not even one PE fits: use a smaller --heap-size (this model needs about %s), or leave it unset to size the heap from the model", memSize(m))
		}
	}
	return usagef("--pes %d: each PE takes about %s (its %s symmetric heap, its copy of the data and the program), %.1f GiB for %d PEs, more than the %.1f GiB this host has available: %s",
		o.pes, memSize(each), memSize(heap), gib(need), o.pes, gib(avail), hint)
}

// activationNote is the start-up header's line on a model's activations
// (models.ActivationSizer) for micro sequences per PE: the estimate in the
// run's recompute mode and without recomputing; with none, what --recompute
// block would need, for a model that recomputes; in the precision the
// built model runs in (models.PrecisionSetter: bf16 says so). cfg is the
// model's Config as the PE built it. "" for a model that gives no
// estimate.
func activationNote(o *options, m models.Model, cfg models.Config, micro int) string {
	a, ok := m.(models.ActivationSizer)
	if !ok || micro < 1 {
		return ""
	}
	have := a.ActivationBytes(micro)
	seqs := fmt.Sprintf("%d sequences", micro)
	if p, ok := m.(models.PrecisionSetter); ok {
		cfg.Precision = p.Precision() // after Build: what runs
		if cfg.Precision == compute.PrecisionBF16 {
			seqs += ", bf16"
		}
	}
	other := func(r models.Recompute) (int64, bool) {
		cfg.Recompute = r
		om, err := models.New(o.model, cfg)
		if err != nil {
			return 0, false
		}
		oa, ok := om.(models.ActivationSizer)
		if rm, isR := om.(models.Recomputer); !ok || !isR || rm.Recompute() != r {
			return 0, false
		}
		return oa.ActivationBytes(micro), true
	}
	mode := o.recipe.Recompute
	if mode == models.RecomputeNone {
		line := fmt.Sprintf("activations: about %s per PE (%s), nothing recomputed", memSize(have), seqs)
		if _, ok := m.(models.Recomputer); ok {
			if b, ok := other(models.RecomputeBlock); ok {
				line += fmt.Sprintf(" (--recompute block: %s)", memSize(b))
			}
		}
		return line
	}
	line := fmt.Sprintf("activations: about %s per PE (%s) with --recompute %s", memSize(have), seqs, mode)
	if n, ok := other(models.RecomputeNone); ok {
		line += fmt.Sprintf(", %s without", memSize(n))
	}
	return line
}

// memAvailable is /proc/meminfo's MemAvailable in bytes, 0 when unknown.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }

// shardVocabHint adds to a shard's token outside the model's vocabulary
// what to do: the shards are of a larger vocabulary (GPT-2's for shards of
// tokenize --tokenizer gpt2 or llm.c's GPT-2 data, given to gpt-tiny), so
// the model needs one that takes their ids.
func shardVocabHint(err error, model string) error {
	var ve *datasets.VocabError
	if !errors.As(err, &ve) {
		return err
	}
	return fmt.Errorf("%w (model %s's): the shards hold ids of a larger vocabulary: pass --vocab %d or more, or train a model that has one (the gpt2 family and llama-124m: 50304, GPT-2's ids; llama3-1b: 128256, Llama 3's)",
		err, model, ve.Token+1)
}
