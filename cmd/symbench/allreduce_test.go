package main

import (
	"errors"
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
