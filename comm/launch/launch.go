// Package launch starts the PEs of a symddp job on this host, watches them
// and tears the job down: `train --pes N`, ddp.Launch (the entry point of
// library programs) and the multi-PE tests use it.
//
// Run re-executes a binary (by default this one) N times with the PE
// environment of docs/DESIGN.md (SYMDDP_PE, SYMDDP_NPES, ...). PE 0's stdout
// is passed through (a terminal stays a terminal); every PE's stderr is
// forwarded line by line with a "[pe N] " prefix. When a PE exits non-zero or
// is killed, Run stops the others (SIGTERM, then SIGKILL after a grace
// period) and returns a *PEError naming that PE, how it ended and the last
// lines of its stderr. For the shm backend Run creates the heap file and
// removes it however the job ends; at start it removes heap files and run
// directories left by launchers that no longer run (killed with SIGKILL).
//
// The package also recognises a process started by mpirun (DetectMPI).
package launch

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/symddp/symddp/comm"
)

// Spec describes a job.
type Spec struct {
	// Path is the binary every PE runs; empty means this binary
	// (/proc/self/exe).
	Path string
	// Args are the PEs' arguments, without the program name; nil means
	// os.Args[1:].
	Args []string
	// NPEs is the number of PEs to start, at least 1.
	NPEs int
	// Backend is the comm backend the PEs open (default comm.DefaultBackend).
	Backend string
	// Env holds extra NAME=value variables for every PE, on top of this
	// process's environment (whose SYMDDP_* variables are dropped).
	Env []string
	// HeapSize and Timeout are passed to the PEs as SYMDDP_HEAP_SIZE and
	// SYMDDP_TIMEOUT; zero leaves the backend's defaults.
	HeapSize int64
	Timeout  time.Duration
	// Stdout receives PE 0's stdout (an *os.File is inherited as is) and the
	// other PEs' stdout, prefixed; nil means os.Stdout.
	Stdout io.Writer
	// Stderr receives every PE's stderr, prefixed "[pe N] " when NPEs > 1;
	// nil means os.Stderr.
	Stderr io.Writer
	// Grace is how long PEs get to exit after SIGTERM before SIGKILL
	// (default 2s).
	Grace time.Duration
	// ForwardSignals makes Run catch SIGINT and SIGTERM while the job runs:
	// the first is forwarded to the PEs (which may checkpoint and exit), a
	// second SIGINT kills them at once.
	ForwardSignals bool
	// TailLines is how many stderr lines of a failed PE the error keeps
	// (default 20).
	TailLines int
	// MPS, when set, runs the job under a private CUDA MPS daemon (see MPS).
	MPS *MPS
}

// Defaults of Spec's zero fields.
const (
	DefaultGrace     = 2 * time.Second
	DefaultTailLines = 20
)

// Run starts spec.NPEs PE processes, waits for them all and returns nil when
// every PE exited with status 0. Otherwise it returns a *PEError for the first
// PE that failed (after stopping the others), an error wrapping
// ErrInterrupted (after a forwarded signal), or ctx's error (after stopping
// the PEs when ctx is done).
func Run(ctx context.Context, spec Spec) error {
	if spec.NPEs < 1 {
		return fmt.Errorf("launch: %d PEs: want at least 1", spec.NPEs)
	}
	if spec.Path == "" {
		spec.Path = "/proc/self/exe"
	}
	if spec.Args == nil {
		spec.Args = os.Args[1:]
	}
	if spec.Backend == "" {
		spec.Backend = comm.DefaultBackend
	}
	if spec.Stdout == nil {
		spec.Stdout = os.Stdout
	}
	if spec.Stderr == nil {
		spec.Stderr = os.Stderr
	}
	if spec.Grace <= 0 {
		spec.Grace = DefaultGrace
	}
	if spec.TailLines <= 0 {
		spec.TailLines = DefaultTailLines
	}
	// Leftovers of launchers killed with SIGKILL; failing to remove them
	// does not stop this job.
	removeStale(comm.HeapDir(), heapPrefix, nil)
	removeStale(os.TempDir(), runDirPrefix, stopStaleMPS)

	runDir, err := os.MkdirTemp("", runDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return fmt.Errorf("launch: run directory in %s (the temporary directory: $TMPDIR): %w", os.TempDir(), err)
	}
	defer os.RemoveAll(runDir)
	if spec.MPS != nil {
		d, env, err := startMPS(*spec.MPS, runDir)
		if err != nil {
			return err
		}
		defer d.stop()
		spec.Env = append(append([]string{}, spec.Env...), env...)
	}
	cfg := comm.Config{NPEs: spec.NPEs, HeapSize: spec.HeapSize, Timeout: spec.Timeout, RunDir: runDir}
	if spec.Backend == "shm" {
		if cfg.HeapName, err = createHeap(comm.HeapDir()); err != nil {
			return err
		}
		defer os.Remove(cfg.HeapName)
	}
	// Pdeathsig fires when the thread that started a PE ends, not the
	// process: keep this goroutine on one thread, which then cannot end
	// (only a goroutine locked to it and exiting ends it) while the job runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	j := newJob(spec, cfg)
	if err := j.start(); err != nil {
		return err
	}
	return j.watch(ctx)
}

// environ is this process's environment without the variables that make a
// process a PE (comm.PEVars, which a launcher started as a PE of another job
// would otherwise pass on), then extra, then the PE's own variables. Other
// SYMDDP_* settings (SYMDDP_BLAS, SYMDDP_HEAP_DIR, ...) reach the PEs.
func environ(extra []string, cfg comm.Config, backend string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(comm.PEVars, name) {
			env = append(env, kv)
		}
	}
	env = append(env, extra...)
	return append(env, cfg.Environ(backend)...)
}

// outputs holds the writers of a job's PEs, which share one mutex.
type outputs struct {
	mu     sync.Mutex
	stderr []*lineWriter
	stdout []*lineWriter // nil where the PE's stdout is a file
}

func (o *outputs) flush() {
	for _, w := range append(o.stderr, o.stdout...) {
		if w != nil {
			w.Flush()
		}
	}
}
