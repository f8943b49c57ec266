package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/symddp/symddp/internal/petest"
	"github.com/symddp/symddp/internal/syncbuf"
)

// TestMain: ddp.Launch re-executes the test binary as the PEs, which run
// main.
func TestMain(m *testing.M) { petest.Main(m, main) }

var (
	logLine     = regexp.MustCompile(`step +\d+ +loss ([0-9.]+) +accuracy`)
	testLine    = regexp.MustCompile(`test: loss [0-9.]+, accuracy ([0-9.]+)% \((\d+) points`)
	replicaLine = regexp.MustCompile(`replicas identical on (all \d+ PEs|both PEs) \(step (\d+), parameter hash [0-9a-f]{16}\)`)
)

func TestSpiralsTrainOnSeveralPEs(t *testing.T) {
	for _, pes := range []int{2, 4} {
		t.Run(strconv.Itoa(pes)+"PEs", func(t *testing.T) {
			args := []string{"--pes", strconv.Itoa(pes), "--log-every", "20"}
			var out, errs syncbuf.Buffer
			if code := run(args, &out, &errs); code != 0 {
				t.Fatalf("customdata %v: exit status %d\nstdout:\n%s\nstderr:\n%s", args, code, out.String(), errs.String())
			}
			text := out.String()
			losses := petest.Losses(t, logLine, text)
			first, last := losses[0], losses[len(losses)-1]
			t.Logf("training loss %.4f -> %.4f", first, last)
			if !(last < first/10) {
				t.Errorf("training losses %v: want the last below a tenth of the first", losses)
			}
			m := testLine.FindStringSubmatch(text)
			if m == nil {
				t.Fatalf("no test line in:\n%s", text)
			}
			if acc, _ := strconv.ParseFloat(m[1], 64); acc < 90 || m[2] != "1000" {
				t.Errorf("test accuracy %s%% on %s points, want at least 90%% on 1000 (chance: 33%%)", m[1], m[2])
			}
			r := replicaLine.FindStringSubmatch(text)
			if r == nil || (r[1] != "all "+strconv.Itoa(pes)+" PEs" && !(pes == 2 && r[1] == "both PEs")) || r[2] != "940" {
				t.Errorf("replica check %q, want identical on %d PEs at step 940\n%s", r, pes, text)
			}
			if !strings.Contains(text, "[pe 0] mlp [64 64] on 3 spiral arms: 4547 parameters") {
				t.Errorf("no start line from PE 0 in:\n%s", text)
			}
		})
	}
}

// TestBadFlagsStopBeforeLaunching: a flag no run can use is one line
// naming it and exit status 2, before any PE starts (--batch-size 0 was a
// division by zero in every PE, --epochs 0 a cosine-schedule error; --arms,
// --train-size, --test-size, --noise, --hidden and a NaN --lr were
// refused by every PE, exit 1, in the words of the spirals or the model).
func TestBadFlagsStopBeforeLaunching(t *testing.T) {
	petest.UsageErrors(t, "customdata", run, []petest.UsageCase{
		{Args: []string{"--pes", "3"}, Want: "--batch-size 64 is not a multiple of --pes 3"},
		{Args: []string{"--batch-size", "0"}, Want: "--batch-size 0: must be positive"},
		{Args: []string{"--batch-size", "-64"}, Want: "--batch-size -64: must be positive"},
		{Args: []string{"--epochs", "0"}, Want: "--epochs 0: must be at least 1"},
		{Args: []string{"--epochs", "-1"}, Want: "--epochs -1: must be at least 1"},
		{Args: []string{"--lr", "-1"}, Want: "--lr -1: want a finite number >= 0"},
		{Args: []string{"--lr", "nan"}, Want: "--lr NaN: want a finite number >= 0"},
		{Args: []string{"--lr", "inf"}, Want: "--lr +Inf: want a finite number >= 0"},
		{Args: []string{"--arms", "1"}, Want: "--arms 1: want at least two (one class each)"},
		{Args: []string{"--train-size", "0"}, Want: "--train-size 0: want at least one point"},
		{Args: []string{"--test-size", "-5"}, Want: "--test-size -5: want at least one point"},
		{Args: []string{"--noise", "-0.1"}, Want: "--noise -0.1: want a finite standard deviation >= 0"},
		{Args: []string{"--noise", "nan"}, Want: "--noise NaN: want a finite standard deviation >= 0"},
		{Args: []string{"--hidden", "64,0"}, Want: "--hidden [64 0]: every width must be at least 1"},
		{Args: []string{"--log-every", "-1"}, Want: "--log-every -1: must not be negative"},
	})
}
