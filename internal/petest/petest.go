// Package petest is for the tests of programs that start their PEs with
// ddp.Launch (or comm/launch): the launcher re-executes the running binary,
// the test binary in a test, as each PE.
package petest

import (
	"io"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/syncbuf"
)

// Main is the TestMain of such a program's tests: in a PE that the
// launcher started (comm.EnvPE set) it runs the program's main, which
// reads the PE's arguments from os.Args as the program does; otherwise it
// runs the tests.
func Main(m *testing.M, main func()) {
	if os.Getenv(comm.EnvPE) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Losses returns the value of line's first group in each of its matches in
// text (a training log's losses, in order); t fails when fewer than two
// lines match, as a fall cannot be judged from one.
func Losses(t *testing.T, line *regexp.Regexp, text string) []float64 {
	t.Helper()
	var losses []float64
	for _, m := range line.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatalf("log line %q: %v", m[0], err)
		}
		losses = append(losses, v)
	}
	if len(losses) < 2 {
		t.Fatalf("fewer than two log lines in:\n%s", text)
	}
	return losses
}

// UsageCase is a command line that no run can use and the line that says
// why.
type UsageCase struct {
	Args []string
	Want string // stderr's one line, after the program's name and ": "
}

// UsageErrors calls run, a program's whole command, with each case's
// arguments, and fails t unless it exits with status 2, prints nothing on
// stdout and exactly name+": "+Want on stderr: a flag no run can use is
// refused before any PE starts, in one line that names it.
func UsageErrors(t *testing.T, name string, run func(args []string, stdout, stderr io.Writer) int, cases []UsageCase) {
	t.Helper()
	for _, tc := range cases {
		var out, errs syncbuf.Buffer
		if code := run(tc.Args, &out, &errs); code != 2 {
			t.Errorf("%s %v: exit status %d, want 2", name, tc.Args, code)
		}
		if got, want := errs.String(), name+": "+tc.Want+"\n"; got != want || out.String() != "" {
			t.Errorf("%s %v: stderr %q and stdout %q, want stderr %q and nothing on stdout", name, tc.Args, got, out.String(), want)
		}
	}
}
