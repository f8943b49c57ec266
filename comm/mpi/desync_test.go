//go:build mpi

package mpi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/commtest"
)

// TestDesync runs the suite's desync cases in jobs of 2 and 3 ranks, with
// the deadline of a minute (timeoutOf): a desync that the check misses
// would end such a job with the watchdog's MPI_Abort, not the wanted error.
func TestDesync(t *testing.T) {
	for _, np := range []int{2, 3} {
		for _, dc := range commtest.DesyncCases {
			t.Run(fmt.Sprintf("np=%d/%s", np, dc.Name), func(t *testing.T) {
				out, err := runJob(t, np, nil, nil, func(t *testing.T, c comm.Comm) { dc.Run(t, c) })
				if err != nil || strings.Count(out, " passed\n") != np || strings.Contains(out, "--- FAIL") {
					t.Fatalf("mpirun -np %d: %v\n---- output ----\n%s", np, err, out)
				}
			})
		}
	}
}
