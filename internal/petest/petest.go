// Package petest is for the tests of programs that start their PEs with
// ddp.Launch (or comm/launch): the launcher re-executes the running binary,
// the test binary in a test, as each PE.
package petest

import (
	"os"
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
