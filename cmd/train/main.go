// Command train trains a model data-parallel over N processing elements that
// share a symmetric heap.
//
//	train --pes 8 --model mlp              start 8 PEs on this host
//	mpirun -np 16 -H a:8,b:8 train --backend mpi --model mlp
//
// Run `train --help` for the flags. Exit status: 0 on success, 2 for a bad
// command line, 130 when stopped by SIGINT, the failed PE's status when a PE
// failed, 1 otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	_ "github.com/symddp/symddp/comm/shm" // the default backend
	"github.com/symddp/symddp/models"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errListModels):
		fmt.Fprintln(stdout, strings.Join(models.Names(), "\n"))
		return 0
	case err != nil:
		return fail(stderr, err)
	}
	return fail(stderr, dispatch(o, stdout, stderr))
}

// dispatch decides this process's role: a PE started by our launcher, a PE
// started by mpirun, or the launcher itself.
func dispatch(o *options, stdout, stderr io.Writer) error {
	cfg, backend, isPE, err := comm.ConfigFromEnv()
	if err != nil {
		return err
	}
	if isPE {
		inPE = true
		dc, err := chooseData(o)
		if err != nil {
			return err
		}
		dc.notice = "" // the launcher said it once
		r := &peRun{o: o, dc: dc, cfg: cfg, backend: backend, localPE: cfg.PE, local: cfg.NPEs, stdout: stdout, stderr: stderr}
		return r.run()
	}
	if mpi, ok, err := launch.DetectMPI(); err != nil {
		return err
	} else if ok {
		inPE = true
		return runUnderMPI(o, mpi, stdout, stderr)
	}
	return launchLocal(o, stdout, stderr)
}

// launchLocal checks what can be checked once, then runs the PEs: in this
// process for one PE on the shm backend, as child processes otherwise.
func launchLocal(o *options, stdout, stderr io.Writer) error {
	backend := o.backend
	if backend == "auto" {
		backend = "shm"
	}
	if backend == "mpi" {
		return usagef("--backend mpi needs an MPI launcher: run `mpirun -np %d train --backend mpi ...`", o.pes)
	}
	dc, err := chooseData(o)
	if err != nil {
		return err
	}
	heap, err := heapSize(o, backend)
	if err != nil {
		return err
	}
	if o.pes == 1 && backend == "shm" {
		r := &peRun{o: o, dc: dc, cfg: comm.Config{PE: 0, NPEs: 1, HeapSize: heap, Timeout: o.timeout},
			backend: backend, local: 1, stdout: stdout, stderr: stderr}
		return r.run()
	}
	args := os.Args[1:]
	if dc.notice != "" {
		fmt.Fprintln(stderr, "warning:", dc.notice)
		args = append(append([]string{}, args...), "--dataset", "synthetic")
	}
	if cpus := runtime.NumCPU(); backend == "shm" && o.pes > cpus {
		fmt.Fprintf(stderr, "note: %d PEs on %d CPUs take turns on them, and every allreduce waits for the PEs that are not running: expect fewer samples/s than with --pes %d (fine for trying data parallelism out)\n",
			o.pes, cpus, cpus)
	}
	spec := launch.Spec{Args: args, NPEs: o.pes, Backend: backend, HeapSize: heap, Timeout: o.timeout,
		Stdout: stdout, Stderr: stderr, ForwardSignals: true}
	if backend == "nvshmem" {
		if err := prepareGPULaunch(o, &spec, stderr); err != nil {
			return err
		}
	}
	return launch.Run(context.Background(), spec)
}

// runUnderMPI runs this process as one PE of an mpirun job.
func runUnderMPI(o *options, mpi launch.MPIEnv, stdout, stderr io.Writer) error {
	backend := o.backend
	if backend == "auto" {
		backend = "mpi"
	}
	if backend == "shm" {
		return usagef("--backend shm cannot run under mpirun (its PEs are started by train itself): use --backend mpi, or run train --pes N without mpirun")
	}
	if mpi.Size > 0 && o.set("pes") && o.pes != mpi.Size {
		return usagef("--pes %d does not match the %d processes mpirun started (drop --pes under mpirun)", o.pes, mpi.Size)
	}
	if backend == "mpi" && !contains(comm.Backends(), "mpi") {
		return errors.New("this train binary has no MPI support: rebuild it with `go build -tags mpi ./cmd/train` (needs libopenmpi-dev), or run train --pes N without mpirun")
	}
	dc, err := chooseData(o)
	if err != nil {
		return err
	}
	if mpi.Rank != 0 {
		dc.notice = ""
	}
	heap, err := heapSize(o, backend)
	if err != nil {
		return err
	}
	local := mpi.LocalRank
	if local < 0 {
		local = mpi.Rank
	}
	perHost := mpi.Size
	if mpi.LocalSize > 0 {
		perHost = mpi.LocalSize // PEs on this host, for the threads per PE
	}
	cfg := comm.Config{PE: mpi.Rank, NPEs: mpi.Size, HeapSize: heap, Timeout: o.timeout}
	if backend == "nvshmem" && o.gpuLib != "" {
		cfg.Options = map[string]string{"lib": o.gpuLib} // what --pes N passes as SYMDDP_CUDA_LIB
	}
	r := &peRun{o: o, dc: dc, cfg: cfg, backend: backend, localPE: local, local: max(1, perHost), stdout: stdout, stderr: stderr}
	return r.run()
}

// heapSize is --heap-size, or what the model's arenas need plus room for
// the trainer's small buffers.
func heapSize(o *options, backend string) (int64, error) {
	if o.heapSize != "" {
		return parseBytes("--heap-size", o.heapSize, false)
	}
	if !contains(models.Names(), o.model) {
		return 0, usagef("--model %q: unknown model (known: %s)", o.model, strings.Join(models.Names(), ", "))
	}
	m, err := models.New(o.model, o.modelConfig())
	if err != nil {
		return 0, usageError{err}
	}
	n := int64(0)
	for _, p := range m.Params() {
		n += int64(p.Size())
	}
	const slack = 4 << 20 // metrics, replica hashes, alignment
	// parameters and gradients, and up to two optimizer state slots where
	// the sharded update keeps its state in the heap (host arenas: not on
	// nvshmem, whose heap is GPU memory and whose update is not sharded)
	arrays := int64(2)
	if o.shardUpdate && backend != "nvshmem" {
		arrays = 4
	}
	need := arrays*4*(n+64) + slack
	return (need + (1<<20 - 1)) &^ (1<<20 - 1), nil
}

// inPE is true in a PE process (started by the launcher or by mpirun).
var inPE bool

// exitPEUsage is a PE's exit status for a bad command line; the launcher
// turns it into 2. (A PE cannot use 2 itself: that is a Go panic's status.)
const exitPEUsage = 64

// fail prints err in one line (plus a failed PE's stderr tail) and returns
// the exit status.
func fail(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	var pe *launch.PEError
	var rep reportedError
	switch {
	case errors.As(err, &rep):
		return 1
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "train: %v\nRun 'train --help' for the flags.\n", err)
		if inPE {
			return exitPEUsage
		}
		return 2
	case errors.Is(err, errStopped):
		return 130
	case errors.Is(err, launch.ErrInterrupted):
		fmt.Fprintln(stderr, "train: interrupted")
		return 130
	case errors.As(err, &pe):
		fmt.Fprintf(stderr, "train: %v\n", err)
		switch {
		case pe.ExitCode == exitPEUsage:
			return 2
		case pe.ExitCode == 2 && pe.Signal == 0: // a Go panic in the PE
			return 1
		}
		return pe.ExitStatus()
	}
	fmt.Fprintf(stderr, "train: %v\n", err)
	return 1
}
