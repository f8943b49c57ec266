package ddp_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/ddp"
)

// These tests stay in this process: the paths of Launch that start PE
// processes are run by the tests of examples/convnet and examples/customdata.

func TestLaunchRejectsBadJobsBeforeStarting(t *testing.T) {
	for _, tc := range []struct {
		job  ddp.Job
		want string
	}{
		{ddp.Job{PEs: -1}, "ddp: -1 PEs: want at least 1"},
		{ddp.Job{PEs: 2, Backend: "mpi"}, "ddp: the mpi backend needs an MPI launcher: run `mpirun -np 2 "},
		{ddp.Job{PEs: 2, Backend: "carrier-pigeon"}, `ddp: unknown comm backend "carrier-pigeon" (built in: `},
	} {
		called := false
		err := ddp.Launch(context.Background(), tc.job, func(context.Context, comm.Comm) error {
			called = true
			return nil
		})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Launch(%+v) = %v, want an error starting %q", tc.job, err, tc.want)
		}
		if called {
			t.Errorf("Launch(%+v) called the function", tc.job)
		}
	}
}

func TestLaunchRunsOnePEInProcess(t *testing.T) {
	var got []int
	err := ddp.Launch(context.Background(), ddp.Job{}, func(ctx context.Context, c comm.Comm) error {
		got = append(got, c.MyPE(), c.NPEs())
		if c.Backend() != "shm" {
			t.Errorf("backend %q, want shm", c.Backend())
		}
		return ctx.Err()
	})
	if err != nil || len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("Launch = %v, ran as PE/NPEs %v; want nil and [0 1]", err, got)
	}
	// A failing function's error comes back, and the comm is closed all the
	// same: a later Launch in this process opens a new one.
	boom := errors.New("boom")
	err = ddp.Launch(context.Background(), ddp.Job{PEs: 1}, func(context.Context, comm.Comm) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Launch = %v, want boom", err)
	}
	if err := ddp.Launch(context.Background(), ddp.Job{}, func(context.Context, comm.Comm) error { return nil }); err != nil {
		t.Fatalf("Launch after a failed one: %v", err)
	}
}

func TestLaunchRunsAsThePEItsEnvironmentNames(t *testing.T) {
	// What the launcher tells a PE; a one-PE job needs no heap file.
	t.Setenv(comm.EnvPE, "0")
	t.Setenv(comm.EnvNPEs, "1")
	t.Setenv(comm.EnvTimeout, "42s")
	ran := false
	err := ddp.Launch(context.Background(), ddp.Job{PEs: 8}, func(_ context.Context, c comm.Comm) error {
		ran = c.NPEs() == 1 && c.MyPE() == 0
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Launch = %v, ran as PE 0 of 1: %v", err, ran)
	}
	t.Setenv(comm.EnvNPEs, "zero")
	err = ddp.Launch(context.Background(), ddp.Job{}, func(context.Context, comm.Comm) error { return nil })
	if err == nil || !strings.Contains(err.Error(), comm.EnvNPEs) {
		t.Errorf("Launch with a malformed %s = %v, want an error naming it", comm.EnvNPEs, err)
	}
}

func TestLaunchUnderMPI(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	fn := func(context.Context, comm.Comm) error { return nil }
	err := ddp.Launch(context.Background(), ddp.Job{Backend: "shm"}, fn)
	if err == nil || !strings.Contains(err.Error(), "cannot run under mpirun") {
		t.Errorf("shm under mpirun: %v", err)
	}
	if slices.Contains(comm.Backends(), "mpi") {
		return // opening it needs a real mpirun
	}
	err = ddp.Launch(context.Background(), ddp.Job{}, fn)
	if err == nil || !strings.Contains(err.Error(), "build the program with -tags mpi") {
		t.Errorf("mpirun without the mpi backend: %v", err)
	}
}
