package shm_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/comm/launch/launchtest"
)

// heapFilesOfThisProcess lists the heap files named after this process,
// which is the launcher of the jobs these tests start.
func heapFilesOfThisProcess(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(comm.HeapDir(), fmt.Sprintf("symddp-%d-*", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKilledPEStopsJob kills PE 2 of 4 with SIGKILL while the PEs loop over
// allreduces of 4 MiB: the launcher must return with a PEError naming PE 2
// and SIGKILL, and the heap file must be gone. The other PEs' collective
// deadline is 10 minutes: the launcher must stop them (a launcher that left
// them to their deadline would run the test into go test's own timeout).
func TestKilledPEStopsJob(t *testing.T) {
	start := time.Now()
	_, err := launchtest.Launch(t, launchtest.Job{NPEs: 4, Timeout: 10 * time.Minute}, func(t *testing.T, c comm.Comm) {
		b, err := c.Alloc(comm.Float32, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var done atomic.Int64
		if c.MyPE() == 2 {
			go func() {
				time.Sleep(500 * time.Millisecond)
				fmt.Fprintf(os.Stderr, "killing myself after %d allreduces\n", done.Load())
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}()
		}
		for i := 0; i < 1_000_000; i++ {
			if err := c.AllReduce(b, 0, b.Len(), comm.Sum); err != nil {
				t.Fatalf("allreduce %d: %v", i, err)
			}
			done.Add(1)
		}
		t.Errorf("PE %d: a million allreduces and PE 2 is still alive", c.MyPE())
	})
	elapsed := time.Since(start)
	var pe *launch.PEError
	if !errors.As(err, &pe) {
		t.Fatalf("launcher returned %v, want a *launch.PEError", err)
	}
	if pe.PE != 2 || pe.Signal != syscall.SIGKILL {
		t.Errorf("failed PE %d (%s), want PE 2 killed by SIGKILL; error:\n%v", pe.PE, pe.How(), err)
	}
	var n int
	if len(pe.Stderr) != 1 {
		t.Errorf("PE 2's stderr tail is %q, want its one line", pe.Stderr)
	} else if _, err := fmt.Sscanf(pe.Stderr[0], "killing myself after %d allreduces", &n); err != nil || n < 1 {
		t.Errorf("PE 2's stderr tail %q does not say it was killed after some allreduces (%v)", pe.Stderr, err)
	}
	if !strings.HasPrefix(err.Error(), "PE 2 failed: killed by signal 9") {
		t.Errorf("error message %q does not start with the PE and the signal", err)
	}
	t.Logf("the launcher returned %v after the start", elapsed)
	if left := heapFilesOfThisProcess(t); len(left) > 0 {
		t.Errorf("heap files left behind: %v", left)
	}
}

// TestStalledPEMissesDeadline stalls PE 1 of 3 past a 2 s deadline: PEs 0
// and 2 must get a TimeoutError listing exactly PE 1, and (as a program
// would) report it and exit non-zero, which ends the job.
func TestStalledPEMissesDeadline(t *testing.T) {
	const timeoutExit = 4
	_, err := launchtest.Launch(t, launchtest.Job{NPEs: 3, Timeout: 2 * time.Second}, func(t *testing.T, c comm.Comm) {
		if c.MyPE() == 1 {
			time.Sleep(20 * time.Second) // the launcher stops it first
		}
		err := c.Barrier()
		var te *comm.TimeoutError
		if errors.As(err, &te) && errors.Is(err, comm.ErrTimeout) && fmt.Sprint(te.Missing) == "[1]" && te.Op == "barrier" {
			fmt.Fprintf(os.Stderr, "stalled: %v\n", err)
			os.Exit(timeoutExit)
		}
		t.Errorf("PE %d: barrier returned %v, want a timeout missing PE 1", c.MyPE(), err)
	})
	var pe *launch.PEError
	if !errors.As(err, &pe) {
		t.Fatalf("launcher returned %v, want a *launch.PEError", err)
	}
	if pe.PE == 1 || pe.ExitCode != timeoutExit {
		t.Fatalf("PE %d failed with %s, want PE 0 or 2 with exit status %d; error:\n%v", pe.PE, pe.How(), timeoutExit, err)
	}
	want := fmt.Sprintf("comm: PE %d: barrier: deadline of 2s passed; PEs not arrived: [1]", pe.PE)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error does not contain %q:\n%v", want, err)
	}
}

// TestExitedPeerDetected has PE 1 exit with status 0 without closing its
// runtime, which the launcher does not treat as a failure: PE 0, waiting for
// it in a barrier, must notice by itself with an error wrapping ErrPeerFailed
// that names PE 1 (at its 1-minute deadline it would get a TimeoutError).
func TestExitedPeerDetected(t *testing.T) {
	const peerFailedExit = 5
	_, err := launchtest.Launch(t, launchtest.Job{NPEs: 2, Timeout: time.Minute}, func(t *testing.T, c comm.Comm) {
		if c.MyPE() == 1 {
			os.Exit(0)
		}
		err := c.Barrier()
		if errors.Is(err, comm.ErrPeerFailed) && strings.Contains(err.Error(), "PE 1 (pid") {
			fmt.Fprintf(os.Stderr, "peer: %v\n", err)
			os.Exit(peerFailedExit)
		}
		t.Errorf("barrier returned %v, want ErrPeerFailed naming PE 1", err)
	})
	var pe *launch.PEError
	if !errors.As(err, &pe) || pe.PE != 0 || pe.ExitCode != peerFailedExit {
		t.Fatalf("launcher returned %v, want PE 0 failing with status %d", err, peerFailedExit)
	}
}
