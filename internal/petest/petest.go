// Package petest is for the tests of programs that start their PEs with
// ddp.Launch (or comm/launch): the launcher re-executes the running binary,
// the test binary in a test, as each PE.
package petest

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/symddp/symddp/comm"
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
