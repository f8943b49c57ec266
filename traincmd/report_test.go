package traincmd

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/ddp"
	"golang.org/x/sys/unix"
)

// A resumed run's metrics log keeps the records up to its checkpoint and
// drops the rest of the attempt that failed (later steps, its summary, a
// line cut short), so that a restart does not log those steps twice.
func TestResumeTrimsMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	got := resumedLog(t, path, `{"step":10,"loss":2}
{"step":20,"loss":1.5}
{"step":20,"val_loss":1.6}
{"step":30,"loss":1.2}
{"final":false,"step":30,"stopped":true}
{"step":40,"lo`, ddp.StartInfo{NPEs: 1, StartStep: 20, Resumed: "ckpt/step-20", TotalSteps: 50}, map[string]any{"step": 25, "loss": 1.4})
	require.Equal(t, `{"step":10,"loss":2}
{"step":20,"loss":1.5}
{"step":20,"val_loss":1.6}
{"loss":1.4,"step":25}
`, got)
	// without a resume the log starts anew
	r, err := newReporter(&options{metrics: path, model: "mlp"}, 0, io.Discard, io.Discard)
	require.NoError(t, err)
	r.close()
	b, _ := os.ReadFile(path)
	require.True(t, strings.TrimSpace(string(b)) == "", "a new run truncates: %q", b)
}

// resumedLog writes old into the metrics log at path, starts a reporter of
// a --resume latest run there as Fit's start describes it, writes rec and
// returns what the log then holds.
func resumedLog(t *testing.T, path, old string, start ddp.StartInfo, rec map[string]any) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
	r, err := newReporter(&options{metrics: path, resume: "latest", model: "mlp"}, 0, io.Discard, io.Discard)
	require.NoError(t, err)
	r.hooks().OnStart(start)
	r.write(rec)
	r.close()
	require.NoError(t, r.failed)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(got)
}

// --resume latest in a checkpoint directory that holds no checkpoint starts
// from scratch; the metrics log it opened to append to then starts anew, as
// a new run's does, instead of keeping an older run's records (or those of
// an attempt that failed before its first checkpoint) ahead of this run's.
func TestResumeFromScratchStartsMetricsAnew(t *testing.T) {
	got := resumedLog(t, filepath.Join(t.TempDir(), "m.jsonl"), `{"step":0,"val_loss":5.5}
{"step":50,"loss":2}
{"final":true,"step":100}
`, ddp.StartInfo{NPEs: 1, TotalSteps: 50}, map[string]any{"step": 10, "loss": 3}) // Resumed "": no checkpoint
	require.Equal(t, `{"loss":3,"step":10}
`, got)
}

// The start names how the gradients are reduced when there are several PEs
// (StartInfo.Reduction), and says nothing of it with one.
func TestStartSaysReduction(t *testing.T) {
	for _, tc := range []struct{ reduction, want string }{
		{"allreduce of 25 MiB buckets on the collectives stream during backward", "gradients: allreduce of 25 MiB buckets on the collectives stream during backward\n"},
		{"", ""},
	} {
		var errw strings.Builder
		r, err := newReporter(&options{model: "mlp", noProgress: true}, 0, io.Discard, &errw)
		require.NoError(t, err)
		r.hooks().OnStart(ddp.StartInfo{NPEs: 2, TotalSteps: 5, Reduction: tc.reduction})
		r.close()
		got := ""
		for _, line := range strings.SplitAfter(errw.String(), "\n") {
			if strings.HasPrefix(line, "gradients:") {
				got += line
			}
		}
		require.Equal(t, tc.want, got, "Reduction %q", tc.reduction)
	}
}

// A fresh run pointed at a metrics log that holds records says, before it
// starts, that it replaces them (it did so in silence); --eval-only adds its
// record to the log instead of replacing it (pointed at the training run's
// log, it erased that run's history).
func TestMetricsOfAnEarlierRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	old := "{\"step\":50,\"loss\":2}\n{\"final\":true,\"step\":100}\n"
	for _, tc := range []struct {
		o      options
		warn   string
		before string // what the log holds before the run's records
	}{
		{options{metrics: path, model: "mlp"}, "warning: --metrics " + path + " holds 2 records of an earlier run, which this run replaces", ""},
		{options{metrics: path, model: "mlp", evalOnly: true}, "", old},
	} {
		require.NoError(t, os.WriteFile(path, []byte(old), 0o644))
		var stderr strings.Builder
		_, err := checkOutputs(&tc.o, &stderr)
		require.NoError(t, err)
		if tc.warn == "" {
			assert.Empty(t, stderr.String())
		} else {
			assert.Contains(t, stderr.String(), tc.warn)
		}
		r, err := newReporter(&tc.o, 0, io.Discard, io.Discard)
		require.NoError(t, err)
		r.write(map[string]any{"eval_only": true, "step": 0})
		r.close()
		require.NoError(t, r.failed)
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, tc.before+"{\"eval_only\":true,\"step\":0}\n", string(got))
	}
	// a log that is not there, or empty, is nothing to warn of
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	var stderr strings.Builder
	_, err := checkOutputs(&options{metrics: path, model: "mlp"}, &stderr)
	require.NoError(t, err)
	assert.Empty(t, stderr.String())
}

// A record the disk cannot take whole (here the file-size limit, as a full
// disk would) is cut from the log, and the log takes no more: it holds
// whole records only (the last line was left cut short).
func TestMetricsKeepsWholeRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	r, err := newReporter(&options{metrics: path, model: "mlp"}, 0, io.Discard, io.Discard)
	require.NoError(t, err)
	r.write(map[string]any{"step": 1, "loss": 2.5})
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_FSIZE, &old))
	lim := old
	lim.Cur = 40 // the first record's 22 bytes and a part of the next
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &lim))
	r.write(map[string]any{"step": 2, "loss": 2.25, "samples_per_sec": 12345.5})
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &old))
	r.write(map[string]any{"step": 3, "loss": 2})
	r.close()
	require.ErrorContains(t, r.failed, "--metrics "+path+": file too large (the run's results above are complete; the log holds the records written before)")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "{\"loss\":2.5,\"step\":1}\n", string(got))
}
