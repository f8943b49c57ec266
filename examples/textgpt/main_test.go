package main

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/internal/petest"
	"github.com/symddp/symddp/internal/syncbuf"
)

// TestMain: ddp.Launch re-executes the test binary as the PEs, which run
// main.
func TestMain(m *testing.M) { petest.Main(m, main) }

// TestREADMEShowsThisProgram: the README's library example is this
// program's train function as it is, so that what a reader copies builds.
func TestREADMEShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## As a library\n")
	if !ok {
		t.Fatal(`README.md has no "## As a library" section`)
	}
	_, block, ok := strings.Cut(after, "```go\n")
	block, _, closed := strings.Cut(block, "```\n")
	if !ok || !closed {
		t.Fatal(`README.md's "As a library" section has no go code block`)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(src), "func train(")
	if i < 0 {
		t.Fatal("main.go has no func train")
	}
	fn, _, _ := strings.Cut(string(src)[i:], "\n}\n")
	if want := fn + "\n}\n"; block != want {
		t.Errorf("README.md's example:\n%s\nmain.go's train:\n%s", block, want)
	}
}

var (
	// the launcher puts "[pe 0] " before each line of PE 0
	logLine = regexp.MustCompile(`(?m)^\[pe 0\] step \d+ loss ([0-9.]+) \d+ tokens/s$`)
	valLine = regexp.MustCompile(`(?m)^\[pe 0\] val loss ([0-9.]+) \(([0-9.]+) bits per byte\); replicas identical on both PEs \(step 100, parameter hash [0-9a-f]{16}\)$`)
)

// TestTrainsOnTwoPEs runs the program as its user does: 2 PEs, 100 steps
// of gpt-tiny on the start of Go's source tree. The training loss falls
// (logged at steps 50 and 100: 3.663 and 2.871 here),
// the validation loss ends well below a uniform guess over 256 bytes
// (ln 256 = 5.55, 8 bits per byte) and the replicas are identical.
func TestTrainsOnTwoPEs(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for about 15 s")
	}
	var out, errs syncbuf.Buffer
	if err := ddp.Launch(context.Background(), ddp.Job{PEs: 2, Stdout: &out, Stderr: &errs}, train); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errs.String())
	}
	text := out.String()
	losses := petest.Losses(t, logLine, text)
	first, last := losses[0], losses[len(losses)-1]
	t.Logf("training loss %.3f -> %.3f over %d log lines", first, last, len(losses))
	if !(last < first-0.3) {
		t.Errorf("training losses %v: want the last at least 0.3 below the first", losses)
	}
	m := valLine.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no val line with identical replicas at step 100 in:\n%s\nstderr:\n%s", text, errs.String())
	}
	if v, _ := strconv.ParseFloat(m[1], 64); !(v > 0 && v < 3.5) { // 3.066 here
		t.Errorf("val loss %s, want in (0, 3.5)", m[1])
	}
}
