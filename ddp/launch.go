package ddp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	_ "github.com/symddp/symddp/comm/shm" // the default backend, so that Launch works out of the box
)

// Job says how Launch starts the PEs of a program. The zero value runs one
// PE in the calling process on the shm backend.
type Job struct {
	// PEs is the number of PE processes to start on this host when the
	// program was started by hand; 0 means 1. It is ignored in a PE and
	// under mpirun, where the launcher has decided.
	PEs int
	// Backend is the comm backend: "" means shm on one host and mpi under
	// mpirun (the mpi backend is linked in with the build tag "mpi").
	Backend string
	// Args are the PEs' command-line arguments, without the program name;
	// nil means os.Args[1:], so that every PE parses the flags the program
	// was given.
	Args []string
	// Env holds extra NAME=value variables for the PE processes.
	Env []string
	// HeapSize is each PE's symmetric heap in bytes (0: the backend's
	// default, 1 GiB of address space for shm, of which only what the
	// arenas use is memory).
	HeapSize int64
	// Timeout is the deadline of every barrier and allreduce (0:
	// comm.DefaultTimeout); a PE that misses it is named in the error.
	Timeout time.Duration
	// Stdout and Stderr receive the PE processes' output (nil: os.Stdout
	// and os.Stderr); see launch.Spec. A PE run in the calling process
	// writes wherever it writes.
	Stdout, Stderr io.Writer
}

// Launch runs fn as every PE of a job, so that a program trains on N PEs
// the way `train --pes N` does. What it does depends on how the process was
// started, which comm/launch.Detect decides (for `train` too):
//
//   - started by hand: it re-executes the program as job.PEs PE processes
//     (comm/launch.Run, with SIGINT and SIGTERM forwarded to the PEs) and
//     returns nil when all of them succeed, or an error naming the first
//     PE that failed with the last lines of its stderr. One PE on shm runs
//     in the calling process instead, without a child.
//   - a PE that Launch (or `train`) started (SYMDDP_PE set): it opens the comm, calls fn and returns fn's error.
//   - under mpirun (its rank variables set): it opens the backend of the
//     job (mpi unless job.Backend says otherwise) as the rank mpirun gave
//     and calls fn.
//
// fn runs once in every PE, with a context that is cancelled on SIGINT or
// SIGTERM (pass it to Trainer.Fit to stop every PE after the same step).
// Launch closes the comm after fn returns nil; after an error it leaves a
// job of several PEs open, because closing is collective and the peers may
// not get there (the process is about to exit anyway).
//
// Call Launch early in main, before the program does work that only the
// PEs need: the launching process runs main up to Launch too. A program's
// exit status follows launch.ExitCode(err).
func Launch(ctx context.Context, job Job, fn func(ctx context.Context, c comm.Comm) error) error {
	if fn == nil {
		panic("ddp: Launch with a nil function")
	}
	proc, err := launch.Detect()
	if err != nil {
		return err
	}
	switch proc.Role {
	case launch.LocalPE:
		return runPE(ctx, proc.Backend, proc.Config, fn)
	case launch.MPIRank:
		backend := job.Backend
		if backend == "" {
			backend = "mpi"
		}
		if backend == "shm" {
			return errors.New("ddp: the shm backend cannot run under mpirun (its PEs are started by Launch itself): use the mpi backend, or run the program without mpirun")
		}
		if backend == "mpi" && !slices.Contains(comm.Backends(), "mpi") {
			return errors.New("ddp: started by mpirun, but the mpi backend is not in this build: build the program with -tags mpi")
		}
		cfg := proc.Config
		cfg.HeapSize, cfg.Timeout = job.HeapSize, job.Timeout
		return runPE(ctx, backend, cfg, fn)
	}
	switch {
	case job.PEs < 0:
		return fmt.Errorf("ddp: %d PEs: want at least 1", job.PEs)
	case job.PEs == 0:
		job.PEs = 1
	}
	backend := job.Backend
	if backend == "" {
		backend = comm.DefaultBackend
	}
	if backend == "mpi" {
		return fmt.Errorf("ddp: the mpi backend needs an MPI launcher: run `mpirun -np %d %s ...`", job.PEs, os.Args[0])
	}
	if !slices.Contains(comm.Backends(), backend) {
		return fmt.Errorf("ddp: unknown comm backend %q (built in: %s)", backend, strings.Join(comm.Backends(), ", "))
	}
	if job.PEs == 1 && backend == "shm" {
		return runPE(ctx, backend, comm.Config{NPEs: 1, HeapSize: job.HeapSize, Timeout: job.Timeout}, fn)
	}
	return launch.Run(ctx, launch.Spec{
		Args:           job.Args,
		NPEs:           job.PEs,
		Backend:        backend,
		Env:            job.Env,
		HeapSize:       job.HeapSize,
		Timeout:        job.Timeout,
		Stdout:         job.Stdout,
		Stderr:         job.Stderr,
		ForwardSignals: true,
	})
}

// runPE opens the backend for one PE, runs fn and closes the backend.
func runPE(ctx context.Context, backend string, cfg comm.Config, fn func(context.Context, comm.Comm) error) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := comm.Open(backend, cfg)
	if err != nil {
		return fmt.Errorf("open %s backend: %w", backend, err)
	}
	if err := fn(ctx, c); err != nil {
		if c.NPEs() == 1 { // no peer to wait for
			c.Close()
		}
		return err
	}
	if err := c.Close(); err != nil && !errors.Is(err, comm.ErrClosed) {
		return fmt.Errorf("close %s backend: %w", backend, err)
	}
	return nil
}
