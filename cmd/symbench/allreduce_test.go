package main

import (
	"errors"
	"strings"
	"testing"
)

// TestAllReduceNeedsTwoPEs: a job size under 2 is refused before anything
// runs, by allreduce and (in a build with the mpi tag) allreduce-mpi: at one
// PE the bus bandwidth is 0 by its formula and the table means nothing.
func TestAllReduceNeedsTwoPEs(t *testing.T) {
	// the smallest sweep, should a regression measure instead of refusing
	small := map[string][]string{
		"allreduce":     {"--max", "4KiB", "--reps", "1", "--target", "1ms", "--mpi", "off"},
		"allreduce-mpi": {"--max", "4KiB", "--reps", "1", "--target", "1ms"},
	}
	for _, sub := range []string{"allreduce", "allreduce-mpi"} {
		for _, tc := range []struct{ pes, want string }{
			{"1", "--pes 1: an allreduce needs at least 2 PEs (at 1 its bus bandwidth, bytes·2(N−1)/N / time, is 0)"},
			{"2,0", "--pes 0: an allreduce needs at least 2 PEs (at 1 its bus bandwidth, bytes·2(N−1)/N / time, is 0)"},
		} {
			err := subcommands[sub].run(append([]string{"--pes", tc.pes}, small[sub]...))
			if errors.Is(err, errNoMPI) {
				continue // allreduce-mpi in a build without the mpi tag
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("symbench %s --pes %s: %v, want %q", sub, tc.pes, err, tc.want)
			}
		}
	}
}

// The table says when it was measured and how busy the host was, and flags
// a host that was busy before the runs.
func TestAllReduceTableSaysTheLoad(t *testing.T) {
	var out strings.Builder
	rows := []row{{npes: 2, bytes: 4096, shm: result{bytes: 4096, seconds: 1e-6}}}
	opts := allReduceOpts{reps: 1, format: "text"}
	if err := printTable(&out, opts, "host", measuredLine("2026-12-08 03:01 UTC", 1.05, 0.9), rows, ""); err != nil {
		t.Fatal(err)
	}
	want := "measured: 2026-12-08 03:01 UTC; 1-minute load average 1.05 before the runs, 0.90 after (above 0.3 before: other work ran, so the times are not a clean measurement)\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, out.String())
	}
	if quiet := measuredLine("d", 0.1, 0.2); strings.Contains(quiet, "not a clean") {
		t.Errorf("a quiet host flagged: %q", quiet)
	}
}
