package metricsplot

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/symddp/symddp/bench/plotspec"
)

// Logs as train --metrics writes them (fields as in traincmd/report.go).

// lmLog is a language model's run: training records every 10 steps,
// validation every 20, the summary with the final evaluation, and a field
// this package does not know (mfu).
const lmLog = `{"accuracy":0.28,"elapsed":1.9,"epoch":1,"loss":4.5,"lr":0.001,"samples_per_sec":80,"step":10,"tokens_per_sec":10240}
{"accuracy":0.29,"elapsed":3.7,"epoch":1,"loss":3.75,"lr":0.0008,"samples_per_sec":90,"step":20,"tokens_per_sec":11520,"mfu":0.01}
{"step":20,"val_loss":4.25,"val_tokens":4096}
{"accuracy":0.31,"elapsed":5.6,"epoch":1,"loss":3.25,"lr":0.0004,"samples_per_sec":85,"step":30,"tokens_per_sec":10880}
{"elapsed":5.7,"final":true,"flops_per_token":5448192,"precision":"fp32","replicas_identical":true,"samples_per_sec":88,"step":30,"stopped":false,"tokens_per_sec":11264,"val_loss":3.5,"val_tokens":4096}
`

// classifierLog is an MLP's run over two epochs of 40 steps: training
// records (tokens/s 0), the first epoch's test, the summary's.
const classifierLog = `{"accuracy":0.64,"elapsed":0.18,"epoch":1,"loss":1.0,"lr":0.05,"samples_per_sec":28000,"step":20,"tokens_per_sec":0}
{"accuracy":0.8,"elapsed":0.3,"epoch":1,"loss":0.5,"lr":0.04,"samples_per_sec":44000,"step":40,"tokens_per_sec":0}
{"elapsed":0.35,"epoch":1,"step":40,"test_accuracy":0.8125,"test_loss":0.5625}
{"accuracy":0.85,"elapsed":0.6,"epoch":2,"loss":0.375,"lr":0.01,"samples_per_sec":45000,"step":80,"tokens_per_sec":0}
{"elapsed":0.7,"final":true,"replicas_identical":true,"samples_per_sec":43000,"step":80,"stopped":false,"test_accuracy":0.875,"test_loss":0.4375}
`

// resumedLog is a run that crashed after step 40 (its last line cut short)
// and was restarted from its checkpoint at step 20 by a trainer that does
// not trim the log: steps 30 and 40 come again, with other values.
const resumedLog = `{"loss":4,"lr":0.001,"samples_per_sec":80,"step":10,"tokens_per_sec":10240}
{"loss":3.5,"lr":0.0009,"samples_per_sec":80,"step":20,"tokens_per_sec":10240}
{"step":20,"val_loss":3.625,"val_tokens":4096}
{"loss":3.25,"lr":0.0008,"samples_per_sec":80,"step":30,"tokens_per_sec":10240}
{"loss":3,"lr":0.0007,"samples_per_sec":80,"step":40,"tokens_per_sec":10240}
{"step":40,"val_loss":3.125,"val_tokens":4096}
{"accuracy":0.3,"elapsed":9.1,"epoch":1,"lo
{"loss":3.375,"lr":0.0008,"samples_per_sec":70,"step":30,"tokens_per_sec":8960}
{"loss":3.0625,"lr":0.0007,"samples_per_sec":70,"step":40,"tokens_per_sec":8960}
{"step":40,"val_loss":3.1875,"val_tokens":4096}
{"loss":2.875,"lr":0.0005,"samples_per_sec":70,"step":50,"tokens_per_sec":8960}
{"final":true,"samples_per_sec":75,"step":50,"stopped":false,"val_loss":3,"val_tokens":4096}
`

// writeLog writes text into a file named name in a new directory.
func writeLog(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// pts is points from step, value pairs.
func pts(xy ...float64) []plotspec.Point {
	p := make([]plotspec.Point, len(xy)/2)
	for i := range p {
		p[i] = plotspec.Point{X: xy[2*i], Y: xy[2*i+1]}
	}
	return p
}

func readLog(t *testing.T, name, text string) Run {
	t.Helper()
	r, err := Read(writeLog(t, name, text))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func checkSeries(t *testing.T, r Run, want map[Metric][]plotspec.Point) {
	t.Helper()
	for m, s := range r.Series {
		if len(s) > 0 && want[m] == nil {
			t.Errorf("%s: unexpected series %s: %v", filepath.Base(r.Path), m, s)
		}
	}
	for m, w := range want {
		if got := r.Series[m]; !reflect.DeepEqual(got, w) {
			t.Errorf("%s: %s = %v, want %v", filepath.Base(r.Path), m, got, w)
		}
	}
}

func TestReadLanguageModel(t *testing.T) {
	// a crash after the summary cut the next line short: skipped
	r := readLog(t, "lm.jsonl", lmLog+`{"accuracy":0.3,"step":40,"lo`)
	checkSeries(t, r, map[Metric][]plotspec.Point{
		Loss:          pts(10, 4.5, 20, 3.75, 30, 3.25),
		LR:            pts(10, 0.001, 20, 0.0008, 30, 0.0004),
		SamplesPerSec: pts(10, 80, 20, 90, 30, 85),
		TokensPerSec:  pts(10, 10240, 20, 11520, 30, 10880), // not the summary's average
		ValLoss:       pts(20, 4.25, 30, 3.5),               // the summary's evaluation ends the curve
	})
	if !reflect.DeepEqual(r.Skipped, []int{6}) || !r.LanguageModel() {
		t.Errorf("skipped lines %v (want [6]), language model %v", r.Skipped, r.LanguageModel())
	}
}

func TestReadClassifier(t *testing.T) {
	r := readLog(t, "mlp.jsonl", classifierLog)
	checkSeries(t, r, map[Metric][]plotspec.Point{
		Loss:          pts(20, 1, 40, 0.5, 80, 0.375),
		LR:            pts(20, 0.05, 40, 0.04, 80, 0.01),
		SamplesPerSec: pts(20, 28000, 40, 44000, 80, 45000),
		TestLoss:      pts(40, 0.5625, 80, 0.4375),
		TestAccuracy:  pts(40, 0.8125, 80, 0.875),
	})
	if len(r.Skipped) != 0 || r.LanguageModel() {
		t.Errorf("skipped lines %v (want none), language model %v", r.Skipped, r.LanguageModel())
	}
}

// TestReadResumed: after a restart the later records win, and the failed
// attempt's evaluation at step 40 goes with its training records.
func TestReadResumed(t *testing.T) {
	r := readLog(t, "resumed.jsonl", resumedLog)
	checkSeries(t, r, map[Metric][]plotspec.Point{
		Loss:          pts(10, 4, 20, 3.5, 30, 3.375, 40, 3.0625, 50, 2.875),
		LR:            pts(10, 0.001, 20, 0.0009, 30, 0.0008, 40, 0.0007, 50, 0.0005),
		SamplesPerSec: pts(10, 80, 20, 80, 30, 70, 40, 70, 50, 70),
		TokensPerSec:  pts(10, 10240, 20, 10240, 30, 8960, 40, 8960, 50, 8960),
		ValLoss:       pts(20, 3.625, 40, 3.1875, 50, 3),
	})
	if !reflect.DeepEqual(r.Skipped, []int{7}) {
		t.Errorf("skipped lines %v, want [7]", r.Skipped)
	}

	// The restarted attempt stopped before evaluating at step 40: the
	// failed attempt's evaluation there is dropped, not kept as current.
	stale := strings.Join(strings.Split(resumedLog, "\n")[:9], "\n") + "\n"
	r = readLog(t, "stopped.jsonl", stale)
	checkSeries(t, r, map[Metric][]plotspec.Point{
		Loss:          pts(10, 4, 20, 3.5, 30, 3.375, 40, 3.0625),
		LR:            pts(10, 0.001, 20, 0.0009, 30, 0.0008, 40, 0.0007),
		SamplesPerSec: pts(10, 80, 20, 80, 30, 70, 40, 70),
		TokensPerSec:  pts(10, 10240, 20, 10240, 30, 8960, 40, 8960),
		ValLoss:       pts(20, 3.625),
	})

	// Without training records, a repeated evaluation replaces its series
	// from its step on.
	r = readLog(t, "eval.jsonl", `{"step":20,"val_loss":4}
{"step":40,"val_loss":3}
{"step":20,"val_loss":3.5}
{"step":40,"val_loss":2.5}
`)
	checkSeries(t, r, map[Metric][]plotspec.Point{ValLoss: pts(20, 3.5, 40, 2.5)})
}

// TestReadIgnores: records without a step or of an unknown kind, and
// blank lines, are no points and not skipped lines either; CRLF is fine;
// of a summary only the evaluation is a point.
func TestReadIgnores(t *testing.T) {
	r := readLog(t, "odd.jsonl", "{\"run\":\"a\"}\r\n\r\n{\"step\":5,\"note\":\"x\"}\r\n{\"loss\":2,\"lr\":0.1}\r\n{\"step\":10,\"loss\":2,\"samples_per_sec\":9,\"grad_norm\":1}\r\nnull\n"+
		// a summary that carried a training loss: still only its evaluation is drawn
		`{"final":true,"step":12,"loss":1.5,"samples_per_sec":8,"val_loss":2}`)
	checkSeries(t, r, map[Metric][]plotspec.Point{Loss: pts(10, 2), SamplesPerSec: pts(10, 9), ValLoss: pts(12, 2)})
	if len(r.Skipped) != 0 {
		t.Errorf("skipped lines %v, want none", r.Skipped)
	}
}

// TestReadErrors: a log with nothing to draw, or none at all, is an error
// naming the file.
func TestReadErrors(t *testing.T) {
	for name, c := range map[string]struct{ text, want string }{
		"empty.jsonl":   {"", "no training or evaluation record"},
		"nosteps.jsonl": {`{"loss":2}` + "\n" + `{"final":true,"step":3}` + "\n", "no training or evaluation record"},
		"csv.jsonl":     {"step,loss\n10,2.5\n", "(2 lines are not JSON records)"},
	} {
		path := writeLog(t, name, c.text)
		_, err := Read(path)
		if err == nil || !strings.Contains(err.Error(), path+":") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming the file and %q", name, err, c.want)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	if _, err := Read(missing); err == nil || err.Error() != "read "+missing+": no such file or directory" {
		t.Errorf("missing file: error %v", err)
	}
}
