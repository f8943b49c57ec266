package shm_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/commtest"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/comm/launch/launchtest"
)

// TestDesync runs the suite's desync cases in jobs of 2 and 3 PEs, each
// with a deadline of a minute: a desync that the check misses would show
// as a timeout there, not as the error the cases want.
func TestDesync(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, dc := range commtest.DesyncCases {
			t.Run(fmt.Sprintf("NPEs=%d/%s", n, dc.Name), func(t *testing.T) {
				launchtest.Run(t, launchtest.Job{NPEs: n, Timeout: time.Minute}, dc.Run)
			})
		}
	}
}

// TestDesyncEndsJob has PE 1 of 3 call Barrier while the others call
// AllReduce, and every PE report its error and exit as a program would:
// the launcher's error must carry the one line that names PE 1, the
// others and both calls, with a deadline of 5 minutes that it must not
// have waited for.
func TestDesyncEndsJob(t *testing.T) {
	const desyncExit = 3
	_, err := launchtest.Launch(t, launchtest.Job{NPEs: 3, Timeout: 5 * time.Minute}, func(t *testing.T, c comm.Comm) {
		b, err := c.Alloc(comm.Float32, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if c.MyPE() == 1 {
			err = c.Barrier()
		} else {
			err = c.AllReduce(b, 0, b.Len(), comm.Sum)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(desyncExit)
	})
	var pe *launch.PEError
	if !errors.As(err, &pe) || pe.ExitCode != desyncExit {
		t.Fatalf("launcher returned %v, want a PE failing with status %d", err, desyncExit)
	}
	if len(pe.Stderr) != 1 {
		t.Fatalf("PE %d's stderr is %q, want one line", pe.PE, pe.Stderr)
	}
	want := fmt.Sprintf("shm: PE %d: %s: collective #2: PEs 0, 2 call allreduce(sum, 4000 bytes: float32 [0, 1000) of buffer #1); PE 1 calls barrier(): %v",
		pe.PE, map[bool]string{true: "barrier", false: "allreduce"}[pe.PE == 1], comm.ErrDesync)
	if pe.Stderr[0] != want {
		t.Errorf("PE %d's line is\n\t%s\nwant\n\t%s", pe.PE, pe.Stderr[0], want)
	}
	if strings.Contains(err.Error(), "deadline") {
		t.Errorf("the job waited for the deadline: %v", err)
	}
}
