package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Logs as train --metrics writes them: a language model's run, and a
// classifier's that crashed while writing its last line.
const (
	lmMetrics = `{"accuracy":0.28,"elapsed":1.9,"epoch":1,"loss":4.5,"lr":0.001,"samples_per_sec":80,"step":10,"tokens_per_sec":10240}
{"accuracy":0.29,"elapsed":3.7,"epoch":1,"loss":3.75,"lr":0.0008,"samples_per_sec":90,"step":20,"tokens_per_sec":11520}
{"step":20,"val_loss":4.25,"val_tokens":4096}
{"accuracy":0.31,"elapsed":5.6,"epoch":1,"loss":3.25,"lr":0.0004,"samples_per_sec":85,"step":30,"tokens_per_sec":10880}
{"elapsed":5.7,"final":true,"samples_per_sec":88,"step":30,"stopped":false,"tokens_per_sec":11264,"val_loss":3.5,"val_tokens":4096}
`
	classifierMetrics = `{"accuracy":0.64,"epoch":1,"loss":1.0,"lr":0.05,"samples_per_sec":28000,"step":20,"tokens_per_sec":0}
{"accuracy":0.8,"epoch":1,"loss":0.5,"lr":0.04,"samples_per_sec":44000,"step":40,"tokens_per_sec":0}
{"elapsed":0.35,"epoch":1,"step":40,"test_accuracy":0.8125,"test_loss":0.5625}
{"accuracy":0.85,"epoch":2,"loss":0.375,"lr":0.01,"samples_per_sec":45000,"step":80,"tokens_per_sec":0}
{"accuracy":0.86,"epoch":2,"lo`
)

// symplot runs the command with args; it returns the exit status and what
// it wrote to stderr.
func symplot(args ...string) (int, string) {
	var stderr strings.Builder
	code := run(args, &stderr)
	return code, stderr.String()
}

// logFiles writes texts into files name=text in one directory; it returns
// their paths in the order given.
func logFiles(t *testing.T, nameText ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i := 0; i < len(nameText); i += 2 {
		p := filepath.Join(dir, nameText[i])
		if err := os.WriteFile(p, []byte(nameText[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestMetricsPNG: two language-model logs make a PNG of four 6x4 in panels
// at 96 dpi (2x2); a classifier's five panels take 3x2; a line cut short
// is noted with its number.
func TestMetricsPNG(t *testing.T) {
	logs := logFiles(t, "a.jsonl", lmMetrics, "b.jsonl", lmMetrics, "mlp.jsonl", classifierMetrics)
	out := filepath.Join(t.TempDir(), "runs.png")
	if code, stderr := symplot("metrics", "-out", out, "-label", "lr 1e-3", "-label", "lr 3e-3", logs[0], logs[1]); code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if b := decodePNG(t, out).Bounds(); b.Dx() != 1152 || b.Dy() != 768 {
		t.Errorf("language models: image of %v, want 1152x768", b)
	}
	code, stderr := symplot("metrics", "-out", out, logs[2])
	if code != 0 || stderr != "symplot: "+logs[2]+": skipped line 5 (not a JSON record: cut short by a crash?)\n" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if b := decodePNG(t, out).Bounds(); b.Dx() != 1728 || b.Dy() != 768 {
		t.Errorf("classifier: image of %v, want 1728x768", b)
	}
}

// TestMetricsErrors: bad usage exits 2, a bad file 1, each with one line
// that says what is wrong.
func TestMetricsErrors(t *testing.T) {
	logs := logFiles(t, "a.jsonl", lmMetrics, "junk.jsonl", "step,loss\n10,2\n", "empty.jsonl", "")
	out := filepath.Join(t.TempDir(), "runs.png")
	missing := filepath.Join(t.TempDir(), "missing.jsonl")
	for name, c := range map[string]struct {
		args []string
		code int
		want string
	}{
		"no -out":       {[]string{logs[0]}, 2, "-out PNG is required"},
		"no logs":       {[]string{"-out", out}, 2, "no metrics logs"},
		"labels":        {[]string{"-out", out, "-label", "x", logs[0], logs[0]}, 2, "1 -label for 2 logs"},
		"flag after":    {[]string{"-out", out, logs[0], "-label", "x"}, 2, "flag -label after the logs"},
		"unknown flag":  {[]string{"-size", "3", logs[0]}, 2, "-size"},
		"missing file":  {[]string{"-out", out, logs[0], missing}, 1, "read " + missing + ": no such file or directory"},
		"not a log":     {[]string{"-out", out, logs[1]}, 1, logs[1] + ": no training or evaluation record (2 lines are not JSON records)"},
		"empty log":     {[]string{"-out", out, logs[2]}, 1, logs[2] + ": no training or evaluation record"},
		"unwritable":    {[]string{"-out", filepath.Join(out, "x.png"), logs[0]}, 1, "x.png"},
		"-out a folder": {[]string{"-out", t.TempDir(), logs[0]}, 1, "is a directory"},
	} {
		code, stderr := symplot(append([]string{"metrics"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", name, code, stderr, c.code, c.want)
		}
		if lines := strings.Count(stderr, "\n"); c.code == 1 && lines != 1 {
			t.Errorf("%s: %d lines on stderr, want 1: %q", name, lines, stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed run left %s (%v)", out, err)
	}
}

// TestUsage: -h explains both ways to run symplot and exits 0; the figure
// mode works and fails as it did before the metrics mode.
func TestUsage(t *testing.T) {
	code, stderr := symplot("-h")
	if code != 0 || !strings.Contains(stderr, "symplot -in plot.json -out plot.png") || !strings.Contains(stderr, "symplot metrics -out runs.png") {
		t.Errorf("symplot -h: exit %d, %q", code, stderr)
	}
	code, stderr = symplot("metrics", "-h")
	if code != 0 || !strings.Contains(stderr, "-label") || !strings.Contains(stderr, "later wins") {
		t.Errorf("symplot metrics -h: exit %d, %q", code, stderr)
	}
	if code, stderr := symplot("-in", "plot.json"); code != 2 || stderr != "usage: symplot -in plot.json -out plot.png\n" {
		t.Errorf("no -out: exit %d, %q", code, stderr)
	}
	spec := filepath.Join(t.TempDir(), "plot.json")
	if err := figure().Write(spec); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "plot.png")
	if code, stderr := symplot("-in", spec, "-out", out); code != 0 || stderr != "" {
		t.Fatalf("figure: exit %d, %q", code, stderr)
	}
	if b := decodePNG(t, out).Bounds(); b.Dx() != 13*96 || b.Dy() != 5*96 {
		t.Errorf("figure: image of %v, want 1248x480", b)
	}
	if code, stderr := symplot("-in", filepath.Join(t.TempDir(), "none.json"), "-out", out); code != 1 || !strings.HasPrefix(stderr, "symplot: ") {
		t.Errorf("missing figure: exit %d, %q", code, stderr)
	}
}
