package main

import (
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/internal/petest"
	"github.com/symddp/symddp/internal/syncbuf"
)

// TestMain: ddp.Launch re-executes the test binary as the PEs, which run
// main.
func TestMain(m *testing.M) { petest.Main(m, main) }

// report is what PE 0 printed.
type report struct {
	losses, accs   []float64 // of every log line
	testAcc        float64
	replicas       string // the replica check's line
	identicalOnPEs int
	checkpoints    []int // steps
}

var (
	logLine     = regexp.MustCompile(`step +\d+ +epoch \d+ +loss ([0-9.]+) +accuracy +([0-9.]+)%`)
	testLine    = regexp.MustCompile(`test: loss [0-9.]+, accuracy ([0-9.]+)%`)
	ckptLine    = regexp.MustCompile(`checkpoint at step (\d+): `)
	replicaLine = regexp.MustCompile(`replicas identical on all (\d+) PEs \(step \d+, parameter hash [0-9a-f]{16}\)`)
)

// runCommand runs the command with args as the tests' launcher would and
// returns what PE 0 reported.
func runCommand(t *testing.T, args ...string) report {
	t.Helper()
	var out, errs syncbuf.Buffer
	if code := run(args, &out, &errs); code != 0 {
		t.Fatalf("convnet %s: exit status %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errs.String())
	}
	t.Logf("convnet %s:\n%s", strings.Join(args, " "), out.String())
	var r report
	for _, line := range strings.Split(out.String(), "\n") {
		if m := logLine.FindStringSubmatch(line); m != nil {
			r.losses = append(r.losses, atof(t, m[1]))
			r.accs = append(r.accs, atof(t, m[2])/100)
		}
		if m := testLine.FindStringSubmatch(line); m != nil {
			r.testAcc = atof(t, m[1]) / 100
		}
		if m := ckptLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			r.checkpoints = append(r.checkpoints, n)
		}
		if m := replicaLine.FindStringSubmatch(line); m != nil {
			r.replicas = m[0]
			r.identicalOnPEs, _ = strconv.Atoi(m[1])
		}
	}
	if len(r.losses) < 2 || r.replicas == "" {
		t.Fatalf("missing log or replica lines in the output:\n%s", out.String())
	}
	return r
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkLearned asserts that the loss fell, the test accuracy is far above
// chance (10%) and the replicas on every PE are identical.
func checkLearned(t *testing.T, r report, pes int, minAcc float64) {
	t.Helper()
	first, last := r.losses[0], r.losses[len(r.losses)-1]
	if !(last < first/2) {
		t.Errorf("training loss went from %.4f to %.4f: want it at least halved", first, last)
	}
	if r.testAcc < minAcc {
		t.Errorf("test accuracy %.2f%%, want at least %.0f%%", 100*r.testAcc, 100*minAcc)
	}
	if r.identicalOnPEs != pes {
		t.Errorf("replica check: %q, want identical on %d PEs", r.replicas, pes)
	}
}

// The example as CI runs it: 4 PEs on synthetic shapes, with checkpoints.
func TestConvNetLearnsShapesOn4PEs(t *testing.T) {
	dir := t.TempDir()
	r := runCommand(t, "--pes", "4", "--dataset", "synthetic", "--train-size", "4096", "--test-size", "1000",
		"--epochs", "3", "--batch-size", "32", "--log-every", "16", "--check-replicas-every", "64",
		"--checkpoint-dir", dir, "--checkpoint-every", "128")
	checkLearned(t, r, 4, 0.8)
	// Checkpoints at steps 128 and 256 and at the end (384), announced by
	// the OnCheckpoint hook.
	if want := []int{128, 256, 384}; !slices.Equal(r.checkpoints, want) {
		t.Errorf("checkpoints announced at steps %v, want %v", r.checkpoints, want)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil || len(files) != 3 {
		t.Errorf("checkpoint files %v (%v), want 3", files, err)
	}

	// A fresh start in that directory is refused once, before any PE
	// starts, in the command's words (each PE said it in the library's,
	// "Checkpoint.Resume", and the launcher a third time).
	var out, errs syncbuf.Buffer
	code := run([]string{"--pes", "4", "--dataset", "synthetic", "--checkpoint-dir", dir}, &out, &errs)
	if code != 2 || errs.String() != "convnet: --checkpoint-dir "+dir+": it already holds checkpoints (3, the newest ckpt-000000384.safetensors), "+
		"which a run started afresh would overwrite and prune: pass --resume latest to go on from there, or name another --checkpoint-dir\n" {
		t.Errorf("a fresh start in %s: exit %d, stderr:\n%s", dir, code, errs.String())
	}
}

// The same on a subset of Fashion-MNIST where it is installed.
func TestConvNetLearnsFashionMNISTOn4PEs(t *testing.T) {
	if err := datasets.CheckInstalled("fashion-mnist", ""); errors.Is(err, datasets.ErrNotInstalled) {
		t.Skip(err)
	}
	r := runCommand(t, "--pes", "4", "--dataset", "fashion-mnist", "--train-size", "4096", "--test-size", "1000",
		"--epochs", "1", "--batch-size", "32", "--log-every", "16")
	checkLearned(t, r, 4, 0.7)
}

// TestBadFlagsStopBeforeLaunching: a flag no run can use is one line
// naming it and exit status 2, before any PE starts (--batch-size 0 was a
// division by zero in every PE, --epochs 0 a cosine-schedule error;
// --channels 0 was 'hidden sizes [0]' from every PE, exit 1, and a NaN
// --lr a schedule error there).
func TestBadFlagsStopBeforeLaunching(t *testing.T) {
	petest.UsageErrors(t, "convnet", run, []petest.UsageCase{
		{Args: []string{"--batch-size", "0"}, Want: "--batch-size 0: must be positive"},
		{Args: []string{"--batch-size", "-64"}, Want: "--batch-size -64: must be positive"},
		{Args: []string{"--pes", "3"}, Want: "--batch-size 64 is not a multiple of --pes 3"},
		{Args: []string{"--epochs", "0"}, Want: "--epochs 0: must be at least 1"},
		{Args: []string{"--epochs", "-1", "--max-steps", "5"}, Want: "--epochs -1: must be at least 1"},
		{Args: []string{"--max-steps", "-1"}, Want: "--max-steps -1: must not be negative (0: no limit)"},
		{Args: []string{"--checkpoint-every", "-1"}, Want: "--log-every, --checkpoint-every and --check-replicas-every must not be negative"},
		{Args: []string{"--channels", "8,0"}, Want: "--channels [8 0]: every block needs at least 1 channel"},
		{Args: []string{"--lr", "nan"}, Want: "--lr NaN: want a finite number >= 0 (0: the optimizer's default)"},
		{Args: []string{"--lr", "-1"}, Want: "--lr -1: want a finite number >= 0 (0: the optimizer's default)"},
	})
}
