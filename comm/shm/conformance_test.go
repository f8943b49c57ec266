package shm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/commtest"
	"github.com/symddp/symddp/comm/launch/launchtest"
	_ "github.com/symddp/symddp/comm/shm"
)

// reopen opens shm again with this process's configuration, for the
// suite's second-Open check.
func reopen() (comm.Comm, error) {
	cfg, backend, isPE, err := comm.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	if !isPE {
		cfg, backend = comm.Config{NPEs: 1}, "shm"
	}
	return comm.Open(backend, cfg)
}

// TestConformanceNoLauncher runs the suite on a one-PE runtime opened in the
// test process itself, with a private heap.
func TestConformanceNoLauncher(t *testing.T) {
	c, err := comm.Open("shm", comm.Config{NPEs: 1})
	if err != nil {
		t.Fatal(err)
	}
	commtest.RunAll(t, c, commtest.Options{Reopen: reopen})
}

// TestConformance runs the suite in jobs of 1, 2, 3, 4 and 8 PE processes.
func TestConformance(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprintf("NPEs=%d", n), func(t *testing.T) {
			launchtest.Run(t, launchtest.Job{NPEs: n, Timeout: time.Minute}, func(t *testing.T, c comm.Comm) {
				if c.NPEs() != n {
					t.Fatalf("NPEs() = %d, want %d", c.NPEs(), n)
				}
				commtest.RunAll(t, c, commtest.Options{Reopen: reopen})
			})
		})
	}
}
