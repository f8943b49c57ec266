package traincmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
)

// reporter turns the trainer's hooks into what PE 0 shows: a progress bar
// on a terminal, log lines otherwise, JSON-lines metrics, a summary.
type reporter struct {
	o       *options
	pe      int
	out     io.Writer
	errw    io.Writer
	bar     *progressbar.ProgressBar
	metrics *os.File
	enc     *json.Encoder
	start   ddp.StartInfo
	t0      time.Time
	last    ddp.LogInfo
	failed  error // the first write to the metrics file that failed

	recipe      string  // the resolved recipe in one line (recipe.describe), for the header
	activations string  // the activations' estimate (activationNote), for the header; "" for none
	byteText    bool    // byte-level text (--dataset text, byte tokenizer): losses in bits per byte too
	mfu         mfuInfo // a language model's FLOPs per token and the devices' peak
}

// newReporter opens the metrics file on PE 0: a new one, or the end of the
// old one when the run resumes (a restart continues its metrics).
func newReporter(o *options, pe int, stdout, stderr io.Writer) (*reporter, error) {
	r := &reporter{o: o, pe: pe, out: stdout, errw: stderr, t0: time.Now()}
	if pe == 0 && o.metrics != "" {
		f, err := openMetrics(o)
		if err != nil {
			return nil, err
		}
		r.metrics, r.enc = f, json.NewEncoder(f)
	}
	return r, nil
}

// openMetrics opens --metrics for writing: truncated for a new run,
// appended to when resuming (and trimmed at the start: trimMetrics) and by
// --eval-only, whose one record joins the log it is pointed at.
func openMetrics(o *options) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if o.resume != "" || o.evalOnly {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := os.OpenFile(o.metrics, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", o.metrics, unwrapPath(err))
	}
	return f, nil
}

// trimMetrics drops from the metrics log of a resumed run what came after
// the checkpoint it resumes from (step above step, summaries, a line cut
// short by a crash), so that a restart (--max-restarts, --resume) does not
// log those steps twice. A failure is kept for the end, as a write's is.
func (r *reporter) trimMetrics(step int) {
	if r.metrics == nil {
		return
	}
	data, err := os.ReadFile(r.o.metrics)
	if err == nil {
		var kept bytes.Buffer
		for _, line := range bytes.SplitAfter(data, []byte("\n")) {
			var rec struct {
				Step  *int  `json:"step"`
				Final *bool `json:"final"`
			}
			if json.Unmarshal(line, &rec) != nil || rec.Step == nil || *rec.Step > step || rec.Final != nil || !bytes.HasSuffix(line, []byte("\n")) {
				continue
			}
			kept.Write(line)
		}
		if err = r.metrics.Truncate(0); err == nil {
			_, err = r.metrics.Write(kept.Bytes()) // O_APPEND: at the new end
		}
	}
	if err != nil && r.failed == nil {
		r.failed = fmt.Errorf("--metrics %s: dropping the steps after the checkpoint: %w", r.o.metrics, unwrapPath(err))
	}
}

// isTerminal reports whether w is a terminal (progress bars only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (r *reporter) hooks() ddp.Hooks {
	if r.pe != 0 {
		return ddp.Hooks{}
	}
	return ddp.Hooks{
		OnStart: func(s ddp.StartInfo) {
			r.start = s
			update := ""
			if s.ShardedUpdate {
				update = ", optimizer sharded over the PEs"
			}
			fmt.Fprintf(r.errw, "training %s: %d parameters, %s (%s, %s), global batch %d (%d per PE per micro-batch), %s%s\n",
				r.o.model, s.Params, plural(s.NPEs, "PE"), s.Backend, s.Engine, r.o.recipe.Batch, s.MicroBatch, plural(s.TotalSteps, "step"), update)
			fmt.Fprintf(r.errw, "recipe: %s\n", r.recipe)
			if s.Reduction != "" {
				fmt.Fprintf(r.errw, "gradients: %s\n", s.Reduction)
			}
			if r.activations != "" {
				fmt.Fprintln(r.errw, r.activations)
			}
			if s.InitFrom != "" {
				fmt.Fprintf(r.errw, "initial weights: %s; fresh optimizer state, step 0\n", s.InitFrom)
			}
			if s.Resumed != "" {
				fmt.Fprintf(r.errw, "resumed from %s at step %d\n", s.Resumed, s.StartStep)
				r.trimMetrics(s.StartStep)
				if s.StartStep >= s.TotalSteps {
					fmt.Fprintf(r.errw, "note: this run ends at step %d, so there is nothing to train: raise --max-steps (or --epochs) to go on\n", s.TotalSteps)
				}
			} else if r.o.resume != "" {
				// --resume latest found no checkpoint and starts from
				// scratch: the log it appended to holds no step of this
				// run (an older run's, or an attempt that failed before
				// its first checkpoint), so it starts anew as a new run's
				// does (no record is at or before step -1)
				r.trimMetrics(-1)
			}
			if m := r.mfu; m.peak > 0 {
				fmt.Fprintf(r.errw, "MFU against %.4g TFLOP/s (%s): %.4g FLOPs per token (6N + 6LCT), computing in %s\n",
					m.peak/1e12, m.peakSource, m.flopsPerToken, m.precision)
			}
			if !r.o.noProgress && isTerminal(r.out) {
				r.bar = progressbar.NewOptions(s.TotalSteps,
					progressbar.OptionSetWriter(r.out),
					progressbar.OptionSetDescription("train"),
					progressbar.OptionShowCount(),
					progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionClearOnFinish())
				_ = r.bar.Set(s.StartStep)
			}
		},
		OnStep: func(s ddp.StepInfo) {
			if r.bar != nil {
				_ = r.bar.Set(s.Step)
			}
		},
		OnEval: func(step int, m ddp.Metrics) {
			r.clearBar()
			fmt.Fprintf(r.out, "step %d: val loss %.4f%s (%d tokens)\n", step, m.Loss, r.bpb(m.Loss), m.Samples)
			r.write(map[string]any{"step": step, "val_loss": m.Loss, "val_tokens": m.Samples})
		},
		OnLog: func(l ddp.LogInfo) {
			r.last = l
			line := fmt.Sprintf("epoch %d step %d/%d loss %.4f acc %.2f%% lr %.4g %.0f samples/s",
				l.Epoch+1, l.Step, r.start.TotalSteps, l.Loss, 100*l.Accuracy, l.LR, l.SamplesPerSec)
			if r.o.languageModel {
				line = fmt.Sprintf("step %d/%d loss %.4f lr %.4g %.0f tokens/s%s",
					l.Step, r.start.TotalSteps, l.Loss, l.LR, l.TokensPerSec, r.mfu.suffix(l.TokensPerSec))
			}
			if r.bar != nil {
				r.bar.Describe(fmt.Sprintf("loss %.4f acc %.1f%%", l.Loss, 100*l.Accuracy))
			} else {
				fmt.Fprintln(r.out, line)
			}
			rec := map[string]any{"step": l.Step, "epoch": l.Epoch + 1, "loss": l.Loss, "accuracy": l.Accuracy,
				"samples_per_sec": l.SamplesPerSec, "tokens_per_sec": l.TokensPerSec, "elapsed": l.Elapsed.Seconds(), "lr": l.LR}
			if v, ok := r.mfu.of(l.TokensPerSec); ok {
				rec["mfu"] = v
			}
			r.write(rec)
		},
		OnEpochEnd: func(e ddp.EpochInfo) {
			if !e.Evaluated {
				return
			}
			r.clearBar()
			fmt.Fprintf(r.out, "epoch %d done in %.1fs: test loss %.4f, test accuracy %.2f%%\n",
				e.Epoch+1, e.Elapsed.Seconds(), e.Test.Loss, 100*e.Test.Accuracy)
			r.write(map[string]any{"step": e.Step, "epoch": e.Epoch + 1, "test_loss": e.Test.Loss,
				"test_accuracy": e.Test.Accuracy, "elapsed": e.Elapsed.Seconds()})
		},
		OnWarning: func(msg string) {
			r.clearBar()
			fmt.Fprintln(r.errw, "warning:", msg)
		},
		OnCheckpoint: func(path string, step int) {
			if r.bar == nil {
				fmt.Fprintf(r.out, "checkpoint %s (step %d)\n", path, step)
			}
		},
	}
}

func (r *reporter) clearBar() {
	if r.bar != nil {
		_ = r.bar.Clear()
	}
}

func (r *reporter) write(v map[string]any) {
	if r.enc == nil {
		return
	}
	end, serr := r.metrics.Seek(0, io.SeekEnd)
	if err := r.enc.Encode(v); err != nil {
		// said once, at the end: the run goes on and fails then. The log
		// keeps its whole records only (a full disk cut the line short)
		// and takes no more, which could follow the cut line.
		if serr == nil {
			r.metrics.Truncate(end)
		}
		r.enc = nil
		if r.failed == nil {
			r.failed = fmt.Errorf("--metrics %s: %w (the run's results above are complete; the log holds the records written before)", r.o.metrics, unwrapPath(err))
		}
	}
}

// deviceWaitLine says how much of the run PE 0's host spent waiting for
// the device on the GPU step path, and so which of the two bounds the
// steps; "" when it did not wait (host engines, eager device steps).
func deviceWaitLine(res ddp.Result) string {
	f, ok := deviceWaitFrac(res)
	if !ok {
		return ""
	}
	bound := "the GPU bounds the steps"
	if f < 0.2 {
		bound = "the host bounds the steps: its data pipeline and launches take about as long as the GPU's step"
	}
	return fmt.Sprintf("host waited for the GPU %.0f%% of the run (%.2fs): %s", 100*f, res.DeviceWait.Seconds(), bound)
}

// deviceWaitFrac is the share of the run that the host waited for the
// device; false when it never waited.
func deviceWaitFrac(res ddp.Result) (float64, bool) {
	if res.DeviceWait <= 0 || res.Elapsed <= 0 {
		return 0, false
	}
	return res.DeviceWait.Seconds() / res.Elapsed.Seconds(), true
}

// summary prints the final lines of a run.
func (r *reporter) summary(res ddp.Result, c comm.Comm, e compute.Engine) {
	if r.bar != nil {
		_ = r.bar.Finish()
	}
	how := "done"
	if res.Stopped {
		how = "stopped by signal"
	}
	tokensPerSec := res.SamplesPerSec * float64(r.start.Tokens)
	steps := stepsDone(res.Steps, r.start.StartStep)
	if r.start.Tokens > 0 {
		fmt.Fprintf(r.out, "%s: %s in %.1fs, %.0f tokens/s on %s (%s, %s)%s\n",
			how, steps, res.Elapsed.Seconds(), tokensPerSec, plural(c.NPEs(), "PE"), c.Backend(), e.Name(), r.mfu.suffix(tokensPerSec))
	} else {
		fmt.Fprintf(r.out, "%s: %s (%s) in %.1fs, %.0f samples/s on %s (%s, %s)\n",
			how, steps, epochs(res.Steps, r.start.StepsPerEpoch), res.Elapsed.Seconds(), res.SamplesPerSec, plural(c.NPEs(), "PE"), c.Backend(), e.Name())
	}
	if res.Test.Samples > 0 {
		fmt.Fprintln(r.out, r.evalLine(res.Test))
	}
	if line := deviceWaitLine(res); line != "" {
		fmt.Fprintln(r.out, line)
	}
	fmt.Fprintln(r.out, res.Replicas)
	var devBytes int64
	if len(res.DeviceBytes) > 0 {
		// each engine's pool plus the arenas (parameters and gradients) in the symmetric heap
		arenas := 8 * int64(r.start.Params)
		devBytes = res.DeviceBytes[0] + arenas
		if len(res.DeviceBytes) == 1 {
			fmt.Fprintf(r.out, "device memory of PE 0: %.2f GiB (%.2f GiB by the engine: activations, optimizer state, workspaces; %.2f GiB of parameter and gradient arenas)\n",
				gib(devBytes), gib(res.DeviceBytes[0]), gib(arenas))
		} else {
			fmt.Fprintf(r.out, "device memory per PE, by the engine (activations, optimizer state, workspaces) + %.3f GiB of parameter and gradient arenas each:", gib(arenas))
			for pe, b := range res.DeviceBytes {
				fmt.Fprintf(r.out, " PE %d %.3f", pe, gib(b))
			}
			fmt.Fprintln(r.out, " GiB")
		}
	}
	rec := map[string]any{"final": !res.Stopped, "stopped": res.Stopped, "step": res.Steps,
		"samples_per_sec": res.SamplesPerSec, "elapsed": res.Elapsed.Seconds(), "replicas_identical": res.Replicas.Identical}
	if res.Test.Samples > 0 {
		r.evalRecord(rec, res.Test)
	}
	if r.start.Tokens > 0 {
		rec["tokens_per_sec"] = tokensPerSec
	}
	if f, ok := deviceWaitFrac(res); ok {
		rec["device_wait_frac"] = f
	}
	if devBytes > 0 {
		rec["device_bytes"] = devBytes
	}
	if m := r.mfu; m.flopsPerToken > 0 {
		// what a reader of the log needs to compute MFU over any window
		rec["flops_per_token"], rec["precision"] = m.flopsPerToken, string(m.precision)
		if v, ok := m.of(tokensPerSec); ok {
			rec["mfu"], rec["peak_flops"] = v, m.peak
		}
	}
	r.write(rec)
}

// evaluating is --eval-only's header: the weights and what they are
// evaluated on.
func (r *reporter) evaluating(tr *ddp.Trainer, c comm.Comm, e compute.Engine, test datasets.Source) {
	n := test.Len()
	if r.o.evalBatches > 0 {
		n = min(n, r.o.evalBatches*r.o.batch)
	}
	what := plural(n, "sample")
	if tokens := test.Spec().InputSize(); test.Spec().Tokens {
		what = fmt.Sprintf("%s of %d tokens", plural(n, "sequence"), tokens)
	}
	fmt.Fprintf(r.errw, "evaluating %s: %d parameters from %s, on %s (%s, %s): %s of the %s set\n",
		r.o.model, tr.NumParams(), tr.InitSource(), plural(c.NPEs(), "PE"), c.Backend(), e.Name(), what, evalSetName(r.o.languageModel))
}

// evaluated prints --eval-only's result and writes its metrics record.
func (r *reporter) evaluated(m ddp.Metrics, took time.Duration) {
	fmt.Fprintf(r.out, "%s in %.1fs\n", r.evalLine(m), took.Seconds())
	rec := map[string]any{"eval_only": true, "elapsed": took.Seconds()}
	r.evalRecord(rec, m)
	r.write(rec)
}

// evalLine is an evaluation's result as the final report prints it: a
// language model's validation loss, a classifier's test accuracy.
func (r *reporter) evalLine(m ddp.Metrics) string {
	if r.o.languageModel {
		return fmt.Sprintf("val loss %.4f%s (%d tokens)", m.Loss, r.bpb(m.Loss), m.Samples)
	}
	return fmt.Sprintf("test accuracy %.2f%%, test loss %.4f (%d samples)", 100*m.Accuracy, m.Loss, m.Samples)
}

// evalRecord adds an evaluation's result to a metrics record.
func (r *reporter) evalRecord(rec map[string]any, m ddp.Metrics) {
	if r.o.languageModel {
		rec["val_loss"], rec["val_tokens"] = m.Loss, m.Samples
		return
	}
	rec["test_loss"], rec["test_accuracy"] = m.Loss, m.Accuracy
}

// evalSetName is what the evaluation set is called in a model's messages.
func evalSetName(languageModel bool) string {
	if languageModel {
		return "validation"
	}
	return "test"
}

// bpb is ", N bits per byte" for byte-level text, "" otherwise (a token
// of GPT-2's BPE is several bytes).
func (r *reporter) bpb(loss float64) string {
	if !r.byteText {
		return ""
	}
	return fmt.Sprintf(", %.3f bits per byte", datasets.BitsPerByte(loss))
}

// sample prints what the trained model writes after the first tokens of
// the validation window in the middle of the validation data.
//
// It samples from a copy of the model built for one sequence over the
// trained parameters; a signal (ctx) stops it and is returned. A byte-level
// model's sample is text, whatever data it trained on, and so is one of
// GPT-2's tokens, as generate prints them; another vocabulary's, token ids.
func (r *reporter) sample(ctx context.Context, g models.LanguageModel, e compute.Engine, params []float32, val datasets.Source, n int, seed uint64) error {
	const promptLen = 32
	spec := val.Spec()
	b := datasets.Batch{Tokens: make([]int32, spec.InputSize()), Y: make([]int32, spec.InputSize()*spec.Targets)}
	val.GatherBatch([]int{val.Len() / 2}, b) // mid-corpus: the first file may be unusual (a Go tree starts with testdata)
	prompt := b.Tokens[:min(promptLen, len(b.Tokens))]
	// the model's tokenizer, as generate chooses it: the sample is text
	// for a byte-level model and for GPT-2's tokens, drawn from the real
	// tokens only (not the padding of 50304), and token ids otherwise
	var tok datasets.Tokenizer
	if name := datasets.TokenizerForVocab(spec.Classes); name != "" {
		tok, _ = datasets.NewTokenizer(name)
	}
	vocab := spec.Classes
	if tok != nil {
		vocab = min(vocab, tok.Vocab())
	}
	s, err := models.NewSampler(g, e, params)
	if err != nil {
		fmt.Fprintln(r.errw, "warning: sample:", err)
		return nil
	}
	out, err := s.Generate(ctx, prompt, n, models.SampleOptions{Temperature: 0.8, TopK: 40, Seed: seed, Vocab: vocab})
	if ctx.Err() != nil {
		fmt.Fprintln(r.out, "sample stopped by a signal")
		return ctx.Err()
	}
	if err != nil {
		fmt.Fprintln(r.errw, "warning: sample:", err)
		return nil
	}
	switch {
	case tok != nil && tok.Name() == datasets.ByteTokenizer: // from text or from shards: as generate prints it
		fmt.Fprintf(r.out, "sample (temperature 0.8, top-k 40) after %s:\n%s\n", datasets.QuoteBytes(prompt), datasets.DecodeBytes(out))
		return nil
	case tok != nil:
		p, perr := tok.Decode(prompt)
		o, oerr := tok.Decode(out)
		if perr == nil && oerr == nil {
			fmt.Fprintf(r.out, "sample (%s tokens, temperature 0.8, top-k 40) after %q:\n%s\n", tok.Name(), p, o)
			return nil
		}
	}
	fmt.Fprintf(r.out, "sample (token ids, temperature 0.8, top-k 40) after %v:\n%v\n", prompt, out)
	return nil
}

// close closes the metrics file; an error there (the data did not reach
// the disk) counts as a failed write.
func (r *reporter) close() {
	if r.metrics != nil {
		if err := r.metrics.Close(); err != nil && r.failed == nil {
			r.failed = fmt.Errorf("--metrics %s: %w", r.o.metrics, unwrapPath(err))
		}
		r.metrics = nil
	}
}

// stepsDone is what this run trained: "400 steps", or after a resume at
// step 100 "300 steps (101-400, resumed at 100)".
func stepsDone(last, start int) string {
	if start <= 0 {
		return plural(last, "step")
	}
	if last <= start {
		return fmt.Sprintf("0 steps (resumed at %d, the run's end)", start)
	}
	return fmt.Sprintf("%s (%d-%d, resumed at %d)", plural(last-start, "step"), start+1, last, start)
}

// epochs is how far step reached in epochs: "5 epochs", or "0.09 epochs"
// part-way through one.
func epochs(step, perEpoch int) string {
	if perEpoch <= 0 || step%perEpoch == 0 {
		n := 0
		if perEpoch > 0 {
			n = step / perEpoch
		}
		return plural(n, "epoch")
	}
	return fmt.Sprintf("%.2g epochs", float64(step)/float64(perEpoch))
}

// plural is "1 step", "2 steps".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// unwrapPath drops the *os.PathError around err: the message names the
// file already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// newLineHandler logs "msg key=value ..." lines without time or level.
func newLineHandler(w io.Writer) slog.Handler {
	return slog.NewTextHandler(w, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
			return slog.Attr{}
		}
		return a
	}})
}
