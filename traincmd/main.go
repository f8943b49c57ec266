// Package traincmd is the train command as a library: the flags, the PE
// launcher, mpirun's jobs, restarts and the reports, behind one call. The
// train binary is `func main() { os.Exit(traincmd.Main()) }`; a program that
// registers its own models (models.Register) or datasets (datasets.Register)
// and then calls Main is the same command with those available to --model
// and --dataset, since every PE it starts is that program again (as torchrun
// runs the user's script, here the user's binary runs the command):
//
//	func main() {
//		models.Register("mynet", newMyNet)
//		os.Exit(traincmd.Main())
//	}
//
// Run it with `--help` for the flags. Exit status: 0 on success, 2 for a bad
// command line, 128 + the signal when stopped by one (130 SIGINT, 143
// SIGTERM), the failed PE's status when a PE failed (after --max-restarts
// restarts), 1 otherwise.
package traincmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	_ "github.com/symddp/symddp/comm/shm" // the default backend
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
)

// Program is the command's name in its messages ("train: ...", "Run
// 'train --help' for the flags."). A program of one's own that calls Main
// sets it first, to its own name, so that its users are told what to run.
var Program = "train"

// Main runs the train command on the process's arguments and returns its
// exit status, for os.Exit. Register models and datasets, and set Program,
// before calling it.
func Main() int {
	return Run(os.Args[1:], os.Stdout, os.Stderr)
}

// Run is Main with the arguments (without the program name) and the output
// streams given. The PEs it starts are this executable again (os.Args[0]
// with the same arguments), so whatever the program registered before
// calling Run is there in every PE.
func Run(args []string, stdout, stderr io.Writer) int {
	return run(args, stdout, stderr)
}

// proc is this process's role in the job (launch.Detect), set by run.
var proc launch.Process

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	proc = launch.Process{}
	// Under mpirun every rank parses the same command line: rank 0 alone
	// prints the help, or what is wrong with the flags (fail), not each rank
	// (a bad environment is reported below, after the flags).
	var early launch.Process
	if p, err := launch.Detect(); err == nil && p.Role == launch.MPIRank {
		early = p
	}
	helpOut := stdout
	if early.Role == launch.MPIRank && early.MPI.Rank != 0 {
		helpOut = io.Discard
	}
	o, err := parseFlags(args, helpOut)
	if o != nil {
		o.args = args // what every PE is started with
	}
	switch {
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errListModels):
		proc = early
		r, err := models.ParseRecompute(o.recompute)
		if err != nil {
			return fail(stderr, usagef("--recompute %q: want none, gelu or block", o.recompute))
		}
		listModels(helpOut, r)
		return 0
	case err != nil:
		proc = early
		return fail(stderr, err)
	}
	if proc, err = launch.Detect(); err != nil {
		return fail(stderr, err)
	}
	if proc.Role == launch.MPIRank && proc.MPI.Size > 0 {
		// mpirun decided the job size; check --pes against it before
		// anything that depends on it (the batch size)
		if o.set("pes") && o.pes != proc.MPI.Size {
			return fail(stderr, usagef("--pes %d does not match the %d processes mpirun started (drop --pes under mpirun)", o.pes, proc.MPI.Size))
		}
		o.pes = proc.MPI.Size
	}
	if proc.Role == launch.MPIRank && o.maxRestarts != 0 {
		// before validate's "needs --checkpoint-dir", which would not help
		return fail(stderr, usagef("--max-restarts: under mpirun, mpirun starts and stops the PEs; run mpirun in a loop with --resume latest instead (docs/FAULTS.md)"))
	}
	if err := o.validate(); err != nil {
		return fail(stderr, err)
	}
	return fail(stderr, dispatch(o, stdout, stderr))
}

// listModels prints every registered model with its parameters and an
// estimate of its memory per PE at the default batch of one PE (256
// samples and SGD with momentum for a classifier; 16 sequences and AdamW for
// a language model): fp32 arenas, optimizer state and, where the model
// states it, its activations, in fp32 on the CPU engine and, for a model
// that runs in bf16 on the GPU, in bf16 there (with the weights' bf16
// copy); in recompute mode r for the models that recompute
// (models.Recomputer), with the other figure beside it: without
// recomputing, or with --recompute block when r is none.
func listModels(w io.Writer, r models.Recompute) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "model\tparameters\tmemory per PE (estimate), fp32 on the CPU engine\tin bf16 on the GPU")
	for _, name := range models.Names() {
		m, err := models.New(name, models.Config{})
		if err != nil {
			fmt.Fprintf(tw, "%s\t-\t(needs settings: %v)\t\n", name, err)
			continue
		}
		batch, slots, opt := 256, 1, "sgd"
		if m.Data().Tokens {
			batch, slots, opt = 16, 2, "adamw"
		}
		bf16 := "-"
		if p, ok := m.(models.PrecisionSetter); ok && p.SetPrecision(compute.PrecisionBF16) == nil {
			if r == models.RecomputeGELU { // no bf16 form: the build refuses it
				bf16 = memoryLine(name, compute.PrecisionBF16, models.RecomputeNone, batch, slots, opt) + " (no --recompute gelu in bf16)"
			} else {
				bf16 = memoryLine(name, compute.PrecisionBF16, r, batch, slots, opt)
			}
		}
		f := models.FootprintOf(m, batch, slots)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, paramCount(f.Params), memoryLine(name, compute.PrecisionF32, r, batch, slots, opt), bf16)
	}
	tw.Flush()
}

// memoryLine is listModels' estimate of model name at precision p (fp32:
// the CPU engine's), at batch samples a step with an optimizer of slots
// state slots named opt: in recompute mode r with the figure without it
// beside, or at none with --recompute block's beside, for a model that
// recomputes.
func memoryLine(name string, p compute.Precision, r models.Recompute, batch, slots int, opt string) string {
	cfg := models.Config{Precision: p}
	if p == compute.PrecisionF32 {
		cfg.Precision = "" // the factory's default: the mlp takes no precision
	}
	m, err := models.New(name, cfg)
	if err != nil {
		return "-"
	}
	f := models.FootprintOf(m, batch, slots)
	if f.ActivationBytes < 0 {
		return fmt.Sprintf("%s + activations, %s", memSize(f.Bytes()), opt)
	}
	mem := fmt.Sprintf("%s at %d samples a step, %s", memSize(f.Bytes()), batch, opt)
	alt := r
	if alt == models.RecomputeNone {
		alt = models.RecomputeBlock
	}
	cfg.Recompute = alt
	am, err := models.New(name, cfg)
	if err != nil {
		return mem
	}
	if rm, ok := am.(models.Recomputer); !ok || rm.Recompute() != alt {
		return mem
	}
	fa := models.FootprintOf(am, batch, slots)
	if r == models.RecomputeNone {
		return mem + fmt.Sprintf("; --recompute block: %s", memSize(fa.Bytes()))
	}
	return fmt.Sprintf("%s at %d samples a step, %s, --recompute %s (%s without)", memSize(fa.Bytes()), batch, opt, r, memSize(f.Bytes()))
}

// memSize is n bytes in MiB below a GiB, in GiB above.
func memSize(n int64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", gib(n))
}

// paramCount is 842,496 as "842.5K", 124,475,904 as "124.5M".
func paramCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// dispatch runs this process's role: a PE started by our launcher, a PE
// started by mpirun, or the launcher itself.
func dispatch(o *options, stdout, stderr io.Writer) error {
	switch proc.Role {
	case launch.LocalPE:
		dc, err := chooseData(o)
		if err != nil {
			return err
		}
		dc.notice = "" // the launcher said it once
		cfg := proc.Config
		r := &peRun{o: o, dc: dc, cfg: cfg, backend: proc.Backend, localPE: cfg.PE, local: cfg.NPEs, stdout: stdout, stderr: stderr}
		return r.run()
	case launch.MPIRank:
		return runUnderMPI(o, proc.MPI, stdout, stderr)
	}
	return launchLocal(o, stdout, stderr)
}

// launchLocal checks what can be checked once, then runs the PEs: in this
// process for one PE on the shm backend, as child processes otherwise
// (started again after a failure, up to --max-restarts times).
func launchLocal(o *options, stdout, stderr io.Writer) (err error) {
	backend := o.backend
	if backend == "auto" {
		backend = "shm"
	}
	if backend == "mpi" {
		return usagef("--backend mpi needs an MPI launcher: run `mpirun -np %d train --backend mpi ...`", o.pes)
	}
	undo, err := checkOutputs(o, stderr) // before the data, which may take minutes to tokenize
	if err != nil {
		return err
	}
	started := false
	defer func() {
		if err != nil && !started {
			undo() // what the check created, when no PE ran
		}
	}()
	dc, err := chooseData(o)
	if err != nil {
		return err
	}
	heap, err := heapSize(o, backend)
	if err != nil {
		return err
	}
	if backend == "shm" {
		if err := checkPEMemory(o, heap, dc); err != nil {
			return err
		}
	}
	if o.pes == 1 && backend == "shm" && o.maxRestarts == 0 {
		r := &peRun{o: o, dc: dc, cfg: comm.Config{PE: 0, NPEs: 1, HeapSize: heap, Timeout: o.timeout},
			backend: backend, local: 1, stdout: stdout, stderr: stderr}
		started = true
		return r.run()
	}
	args := o.args
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
	started = true
	return runWithRestarts(o, spec, stderr)
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
	if backend == "mpi" && !contains(comm.Backends(), "mpi") {
		return errors.New("this train binary has no MPI support: rebuild it with `go build -tags mpi ./cmd/train` (needs libopenmpi-dev), or run train --pes N without mpirun")
	}
	undo := func() {}
	if mpi.Rank == 0 {
		u, err := checkOutputs(o, stderr)
		if err != nil {
			return err
		}
		undo = u // what the check created, should this rank stop before its PE runs
	}
	dc, err := chooseData(o)
	if err != nil {
		undo()
		return err
	}
	if mpi.Rank != 0 {
		dc.notice = ""
	}
	heap, err := heapSize(o, backend)
	if err != nil {
		undo()
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

// heapSize is --heap-size, or what the model needs (modelHeap).
func heapSize(o *options, backend string) (int64, error) {
	if o.heapSize != "" {
		return parseBytes("--heap-size", o.heapSize, false)
	}
	return modelHeap(o, backend)
}

// modelHeap is what the model's arenas need of the heap, plus room for the
// trainer's small buffers, whatever --heap-size says.
func modelHeap(o *options, backend string) (int64, error) {
	if !contains(models.Names(), o.model) {
		return 0, usagef("--model %q: unknown model (known: %s)", o.model, strings.Join(models.Names(), ", "))
	}
	m, err := models.New(o.model, o.modelConfig())
	if err != nil {
		return 0, usageError{err: err}
	}
	n := int64(0)
	for _, p := range m.Params() {
		n += int64(p.Size())
	}
	const slack = 4 << 20 // metrics, replica hashes, alignment
	// parameters and gradients, and up to two optimizer state slots where
	// the sharded update keeps its state in the heap (host arenas: not on
	// nvshmem, whose sharded update keeps its state in the engine's memory)
	arrays := int64(2)
	if o.shardUpdate && backend != "nvshmem" {
		arrays = 4
	}
	need := arrays*4*(n+64) + slack
	if o.gradDType == "bf16" {
		need += 2 * (n + 64) // the bf16 gradient buffer
	}
	return (need + (1<<20 - 1)) &^ (1<<20 - 1), nil
}

// exitPEUsage is a PE's exit status for a bad command line, exitPEInput
// for unusable input or output files (usageError.input); the launcher turns
// both into 2. (A PE cannot use 2 itself: that is a Go panic's status.)
const (
	exitPEUsage = 64
	exitPEInput = 66 // 65 is exitFinished
)

// helpLine follows a bad command line (not a problem with files).
func helpLine() string { return "Run '" + Program + " --help' for the flags.\n" }

// peExit is the exit status of a PE whose run failed with the usage error ue.
func peExit(ue usageError) int {
	if ue.input {
		return exitPEInput
	}
	return exitPEUsage
}

// fail prints err in one line and returns the exit status. A PE that our
// launcher started hands its error to the launcher instead, which prints it
// once for the job (launch.Process.ReportFailure); under mpirun, a bad
// command line is printed by rank 0 only.
func fail(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	var pe *launch.PEError
	var rep reportedError
	var stop stoppedError
	var intr *launch.InterruptedError
	switch {
	case errors.As(err, &rep):
		return rep.code
	case errors.As(err, &ue):
		switch {
		case proc.Role == launch.LocalPE:
			if !proc.ReportFailure(err) {
				fmt.Fprintf(stderr, "%s: %v\n", Program, err)
			}
			return peExit(ue)
		case proc.Role == launch.MPIRank && proc.MPI.Rank != 0:
			return 2
		}
		fmt.Fprintf(stderr, "%s: %v\n", Program, err)
		if !ue.input {
			fmt.Fprint(stderr, helpLine())
		}
		return 2
	case errors.As(err, &stop):
		return 128 + int(stop.sig)
	case errors.As(err, &intr):
		fmt.Fprintf(stderr, "%s: stopped by %s\n", Program, unix.SignalName(intr.Signal))
		return 128 + int(intr.Signal)
	case errors.As(err, &pe):
		switch {
		case pe.ExitCode == exitPEUsage && pe.Reason != "":
			fmt.Fprintf(stderr, "%s: %s\n%s", Program, pe.Reason, helpLine())
			return 2
		case pe.ExitCode == exitPEInput && pe.Reason != "":
			fmt.Fprintf(stderr, "%s: %s\n", Program, pe.Reason)
			return 2
		case pe.ExitCode == exitPEUsage || pe.ExitCode == exitPEInput:
			fmt.Fprintf(stderr, "%s: %v\n", Program, err)
			return 2
		}
		fmt.Fprintf(stderr, "%s: %v\n", Program, err)
		if pe.Signal == 0 && (pe.ExitCode == 2 || pe.ExitCode == exitFinished) { // 2: a Go panic in the PE
			return 1
		}
		return pe.ExitStatus()
	}
	if proc.Role == launch.LocalPE && proc.ReportFailure(err) {
		return 1
	}
	if leftToRankZero(err) {
		return 1
	}
	fmt.Fprintf(stderr, "%s: %v\n", Program, err)
	return 1
}

// leftToRankZero reports whether this process, a rank of mpirun other
// than 0, leaves err to rank 0 to print: an error every rank reaches
// together (ddp.Shared), which would otherwise be printed once per rank
// (our own launcher gathers its PEs' errors instead).
func leftToRankZero(err error) bool {
	return proc.Role == launch.MPIRank && proc.MPI.Rank != 0 && ddp.Shared(err)
}
