package main

import (
	"errors"
	"os"
	"sort"
	"testing"
)

// TestHelpIsNotAnError: -h of every subcommand prints its flags and
// succeeds, as --help of a command should (gpu-train used to fail with
// "pflag: help requested").
func TestHelpIsNotAnError(t *testing.T) {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	stderr := os.Stderr
	os.Stderr = devnull // pflag prints the usage there
	defer func() { os.Stderr = stderr }()
	for _, n := range names {
		if err := subcommands[n].run([]string{"-h"}); err != nil && !errors.Is(err, errNoMPI) {
			t.Errorf("symbench %s -h: %v", n, err)
		}
	}
}
