package mpi_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// envChild marks a test binary that mpirun started: its tests run the body
// of one job instead of starting mpirun.
const envChild = "SYMDDP_MPITEST"

// inChild reports whether this process is a rank of a job the tests started.
func inChild() bool { return os.Getenv(envChild) != "" }

// tcpOnly are mpirun options that put all traffic between the ranks on TCP,
// as between hosts: the TCP byte transfer layer for point-to-point, and the
// one-sided component that runs over it (osc pt2pt; osc sm would use shared
// memory on one host).
var tcpOnly = []string{"--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "osc", "pt2pt"}

// tcpHier is tcpOnly for hierarchical mode, whose host-local windows need
// the shared-memory one-sided component (osc sm).
var tcpHier = []string{"--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "osc", "sm,pt2pt"}

// needMPI skips t, in one line, unless Open MPI's mpirun and mpicc are
// installed (mpicc stands for the development files the mpi tag builds
// against). It returns mpirun's path.
func needMPI(t *testing.T) string {
	t.Helper()
	mpirun, err := exec.LookPath("mpirun")
	if err == nil {
		_, err = exec.LookPath("mpicc")
	}
	if err != nil {
		t.Skip("Open MPI not installed (Debian: apt-get install openmpi-bin libopenmpi-dev)")
	}
	return mpirun
}

// mpirun runs prog with args as np ranks on this host, with extra mpirun
// options (such as --mca btl tcp,self) and extra NAME=value variables, and
// returns the combined output and the error of the run. The run is stopped
// (SIGTERM, then SIGKILL) at the test's deadline.
func mpirun(t *testing.T, mpirunPath string, np int, mpiOpts []string, env []string, prog string, args ...string) (string, error) {
	t.Helper()
	ctx := context.Background()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-10*time.Second))
		defer cancel()
	}
	full := []string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(np)}
	full = append(full, mpiOpts...)
	full = append(full, prog)
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, mpirunPath, full...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
