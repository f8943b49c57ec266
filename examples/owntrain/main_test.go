package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/syncbuf"
	"github.com/symddp/symddp/traincmd"
)

// TestMain: the launcher re-executes the test binary as the PEs, which run
// main (and so register, as the program does); the tests themselves
// register once here.
func TestMain(m *testing.M) {
	if os.Getenv(comm.EnvPE) != "" {
		main()
		os.Exit(0)
	}
	register()
	os.Exit(m.Run())
}

var (
	testLine    = regexp.MustCompile(`test accuracy ([0-9.]+)%, test loss [0-9.]+ \((\d+) samples\)`)
	replicaLine = regexp.MustCompile(`replicas identical on both PEs \(step (\d+), parameter hash [0-9a-f]{16}\)`)
)

// TestOwnModelThroughTrain: the registered model and dataset train through
// the train command's flags, its launcher (2 PEs: this binary again) and
// its reports, with --model-opt reaching the model.
func TestOwnModelThroughTrain(t *testing.T) {
	var out, errs syncbuf.Buffer
	args := []string{"--pes", "2", "--model", "resmlp", "--dataset", "rings", "--model-opt", "blocks=1",
		"--model-opt", "width=32", "--data-opt", "noise=0.2", "--epochs", "3", "--no-progress"}
	if code := traincmd.Run(args, &out, &errs); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	text, log := out.String(), errs.String()
	// stem 2x32+32, one block 2x(32x32+32), head 32x3+3
	if !strings.Contains(log, "training resmlp: 2307 parameters, 2 PEs") {
		t.Errorf("no start line for resmlp with width 32 and one block in:\n%s", log)
	}
	if !strings.Contains(log, "recipe: sgd (momentum 0.9, no weight decay), lr 0.05, cosine to 0 at step 96") {
		t.Errorf("no recipe line in:\n%s", log)
	}
	m := testLine.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no test line in:\n%s", text)
	}
	if acc, _ := strconv.ParseFloat(m[1], 64); acc < 95 || m[2] != "1024" {
		t.Errorf("test accuracy %s%% on %s samples, want at least 95%% on 1024 (chance: 33%%)", m[1], m[2])
	}
	if r := replicaLine.FindStringSubmatch(text); r == nil || r[1] != "96" {
		t.Errorf("replica check %q, want identical on both PEs at step 96\n%s", r, text)
	}
}

// TestOwnFlagsErrors: bad settings of the registered model and dataset are
// one line and exit 2, before any PE starts; --list-models and --help know
// what was registered.
func TestOwnFlagsErrors(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		want  string
		lines int // 2: a mistake in the flags, with the pointer to --help; 1: a problem with the data
	}{
		{[]string{"--model", "resmlp", "--dataset", "rings", "--model-opt", "blocks=x"}, "--model-opt blocks=x: want a positive integer", 2},
		{[]string{"--model", "resmlp", "--dataset", "rings", "--model-opt", "depth=3"}, "--model-opt depth: resmlp takes width and blocks", 2},
		{[]string{"--model", "resmlp", "--dataset", "rings", "--model-opt", "blocks"}, `--model-opt "blocks": want key=value`, 2},
		{[]string{"--model", "resmlp", "--dataset", "rings", "--data-opt", "rings=1"}, "--dataset rings: --data-opt rings=1: want an integer of at least 2", 1},
		{[]string{"--model", "resmlp", "--dataset", "circles"}, `--dataset "circles": want fashion-mnist, mnist or synthetic (classifiers), text or llmc (language models); registered by this program: rings`, 2},
		{[]string{"--model", "gpt-tiny", "--dataset", "rings"}, "--dataset rings holds float samples; model gpt-tiny is a language model", 2},
	} {
		var out, errs syncbuf.Buffer
		code := traincmd.Run(tc.args, &out, &errs)
		lines := strings.Split(strings.TrimSpace(errs.String()), "\n")
		if code != 2 || !strings.Contains(lines[0], tc.want) || len(lines) != tc.lines {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line containing %q", tc.args, code, errs.String(), tc.want)
		}
	}
	var out, errs syncbuf.Buffer
	if code := traincmd.Run([]string{"--list-models"}, &out, &errs); code != 0 || !strings.Contains(out.String(), "resmlp ") {
		t.Errorf("--list-models: exit %d, %q lacks resmlp", code, out.String())
	}
}

// TestFreshModule: a module of its own that requires symddp (through a
// replace of this checkout, as docs/LIBRARY.md says) builds a program that
// registers a model and runs the train command on it.
func TestFreshModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/mytrain\n\ngo 1.26.8\n\nrequire github.com/symddp/symddp v0.0.0\n\nreplace github.com/symddp/symddp => "+root+"\n")
	write("main.go", `package main

import (
	"os"

	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/traincmd"
)

func main() {
	models.Register("tinymlp", func(cfg models.Config) (models.Model, error) {
		cfg.Hidden = []int{16}
		return models.New("mlp", cfg)
	})
	os.Exit(traincmd.Main())
}
`)
	gocmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gocmd("mod", "tidy")
	gocmd("build", "-o", "mytrain", ".")
	cmd := exec.Command(filepath.Join(dir, "mytrain"), "--pes", "2", "--model", "tinymlp", "--dataset", "synthetic", "--max-steps", "5", "--no-progress")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mytrain: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "training tinymlp: 12730 parameters, 2 PEs") || !strings.Contains(string(out), "replicas identical on both PEs (step 5") {
		t.Errorf("mytrain's output lacks the start line or the replica check:\n%s", out)
	}
}
