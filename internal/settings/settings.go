// Package settings declares every SYMDDP_* environment variable of the
// project once: its name, its default and what it means, and who reads it
// (the launcher's PE variables, the Go code, the CUDA library, tests). The
// Go code reads them through Get and Lookup, which refuse a name that is not
// declared here; `train --help-env` and docs/ENV.md list the table, and a
// test checks that every SYMDDP_ name in the repository's sources is in it.
//
// The package imports nothing of the project, so that every package (comm
// included) can use it.
package settings

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// Reader says who reads a variable.
type Reader uint8

// Readers, in the order WriteHelp lists them.
const (
	// PE variables: set by the launcher (comm/launch) for every PE it
	// starts, read back by comm.ConfigFromEnv.
	PE Reader = iota + 1
	// Go settings: set by the user, read by the Go code, passed on to the PEs.
	Go
	// CUDA settings: read by the CUDA library (cuda/*.cu) in each PE.
	CUDA
	// Test knobs: read by tests, test helpers and scripts only.
	Test
)

// String names the reader as WriteHelp's headings do.
func (r Reader) String() string {
	switch r {
	case PE:
		return "Set by the launcher for each PE"
	case Go:
		return "Settings, passed on to the PEs"
	case CUDA:
		return "Read by the CUDA library (libsymddp_cuda.so), passed on to the PEs"
	case Test:
		return "Tests and scripts only"
	}
	return fmt.Sprintf("Reader(%d)", uint8(r))
}

// Var is one environment variable.
type Var struct {
	Name    string
	Default string // what applies when it is unset, in words ("" when nothing does)
	Reader  Reader
	Meaning string
}

// The variables' names.
const (
	PEName        = "SYMDDP_PE"
	NPEs          = "SYMDDP_NPES"
	Backend       = "SYMDDP_BACKEND"
	Heap          = "SYMDDP_HEAP"
	HeapSize      = "SYMDDP_HEAP_SIZE"
	Timeout       = "SYMDDP_TIMEOUT"
	RunDir        = "SYMDDP_RUN_DIR"
	HeapDir       = "SYMDDP_HEAP_DIR"
	DesyncCheck   = "SYMDDP_DESYNC_CHECK"
	BLAS          = "SYMDDP_BLAS"
	Vec           = "SYMDDP_VEC"
	CUDALib       = "SYMDDP_CUDA_LIB"
	CUDAFused     = "SYMDDP_CUDA_FUSED"
	CUDAOverlap   = "SYMDDP_CUDA_OVERLAP"
	OverlapTrace  = "SYMDDP_OVERLAP_TRACE"
	StopStacks    = "SYMDDP_STOP_STACKS"
	MPIHier       = "SYMDDP_MPI_HIERARCHICAL"
	MPIHostSize   = "SYMDDP_MPI_HOST_SIZE"
	OneShotMax    = "SYMDDP_ONE_SHOT_MAX"
	MaxBlocks     = "SYMDDP_MAX_BLOCKS"
	ForceNVSHMEM  = "SYMDDP_FORCE_NVSHMEM"
	CUDATune      = "SYMDDP_CUDA_TUNE"
	CUDATuneLog   = "SYMDDP_CUDA_TUNE_LOG"
	CUDANoCluster = "SYMDDP_CUDA_LT_NOCLUSTER"
	CUDAOwnGEMM   = "SYMDDP_CUDA_OWN_GEMM"
	CUDAPDL       = "SYMDDP_CUDA_PDL"
	CUDASpin      = "SYMDDP_CUDA_SPIN_US"
	Attention     = "SYMDDP_ATTENTION"
	CUDNNBwd      = "SYMDDP_CUDNN_BWD"
	CUDNNLog      = "SYMDDP_CUDNN_LOG"
	NoCUDNN       = "SYMDDP_NO_CUDNN"
	LaunchTest    = "SYMDDP_LAUNCHTEST"
	LaunchTestN   = "SYMDDP_LAUNCHTEST_N"
	MPITest       = "SYMDDP_MPITEST"
	MPITestCount  = "SYMDDP_MPI_TEST_MAX_COUNT"
	GPUPEs        = "SYMDDP_GPU_PES"
	TestMPS       = "SYMDDP_TEST_MPS"
)

// table is every variable, grouped by reader.
var table = []Var{
	{PEName, "", PE, "this PE's number, 0 to NPES-1; unset: the process is not a PE"},
	{NPEs, "", PE, "the job's size"},
	{Backend, "shm", PE, "the comm backend: shm, nvshmem or mpi"},
	{Heap, "", PE, "the symmetric heap's name (shm: its file)"},
	{HeapSize, "1 GiB (shm, mpi)", PE, "each PE's symmetric heap in bytes (train --heap-size)"},
	{Timeout, "5m", PE, "the deadline of every wait, a Go duration (train --timeout)"},
	{RunDir, "", PE, "a directory private to the job: NVSHMEM unique-id file, MPS pipes, unpacked data"},

	{HeapDir, "/dev/shm, else the temporary directory", Go, "where shm heap files go (a tmpfs)"},
	{DesyncCheck, "on", Go, "off: do not compare the PEs' collective calls (desync detection, docs/FAULTS.md); every PE must agree"},
	{BLAS, "auto", Go, "the CPU engine's GEMMs: auto, openblas or gonum"},
	{Vec, "c (AVX2 where present)", Go, "go: the pure-Go element-wise loops instead of the C ones (internal/hostloops; same bits)"},
	{CUDALib, "next to the binary, then ./build", Go, "the path of libsymddp_cuda.so (train --gpu-lib)"},
	{CUDAFused, "1", Go, "0: no cuBLASLt-fused Linear layers on the GPU"},
	{CUDAOverlap, "1", Go, "0: a fused layer's weight-gradient GEMM runs after, not beside, its input-gradient GEMM"},
	{OverlapTrace, "", Go, "a step number k: on the GPU step path with gradient buckets, stamp the GPU clock around each layer's backward and each bucket's reduction, and log after step k how many reductions ran before backward ended (docs/GPU.md)"},
	{StopStacks, "", Go, "1: a PE that SIGINT or SIGTERM stops (the launcher's stop after another PE failed: a hang's deadline) first writes every goroutine's stack to its stderr, to show where its host thread waited"},
	{MPIHier, "off", Go, "mpi backend: 1, on or true for shared memory within a host and MPI between hosts; 0, off or false for flat"},
	{MPIHostSize, "the real hosts", Go, "mpi backend, hierarchical mode: hosts of k consecutive ranks (to stand for several hosts on one)"},

	{OneShotMax, "256 KiB", CUDA, "GPU allreduce: bytes up to which the one-shot algorithm is used"},
	{MaxBlocks, "2 per SM (1 under MPS)", CUDA, "GPU allreduce: thread blocks per collective"},
	{ForceNVSHMEM, "0", CUDA, "1: take NVSHMEM's collectives as if every peer were on another node (testing)"},
	{CUDATune, "1", CUDA, "0: keep cuBLASLt's first heuristic choice instead of timing candidates (the fp32 compute plans at build time, the bf16 plans' at their first step; bits repeat run to run)"},
	{CUDATuneLog, "0", CUDA, "1: print every cuBLASLt tuning decision, and each bf16 GEMM plan's algorithm (tile, split-K, cluster shape), to stderr"},
	{CUDANoCluster, "unset (one-block clusters where PEs share a GPU and reduce buckets during backward)", CUDA, "1: the bf16 GEMM plans take only cuBLASLt algorithms whose thread-block clusters are one block, always; 0: never. Unset, the engine takes them when ddp says that PEs share its GPU and a bucket size is set: with PEs sharing a GPU under MPS, the reduction overlapped with backward hung on several-block clusters (docs/GPU.md)"},
	{CUDAOwnGEMM, "1", CUDA, "the project's own fp32 GEMM kernels beside cuBLASLt's in the compute plans: 1 (each that fits, checked against cuBLASLt and kept when at least 10% faster), 0 (none), tiled or tiled-split (the tiled kernel, without or with its largest split of k over blocks, on every plan it fits, untimed, also with SYMDDP_CUDA_TUNE=0; a plan where it disagrees with cuBLASLt fails: for tests)"},
	{CUDAPDL, "1", CUDA, "0: launch the step's own kernels without programmatic dependent launch"},
	{CUDASpin, "1000", CUDA, "microseconds a host wait for GPU work (a step's report, a stream) spins before it sleeps; sleeps wake late by the timer slack, about 50 us"},
	{Attention, "auto", CUDA, "bf16 attention: auto (cuDNN's fused attention where the library was built with cuDNN and its plans build for the shape, else ours), cudnn (cuDNN's, or an error saying why not), own (ours: mma.sync, or wmma)"},
	{CUDNNBwd, "det", CUDA, "cuDNN attention's backward form: det (dP in a workspace of B*NH*T*T bf16; the bits repeat), accum2 or accum (an fp32 dQ the engine adds into: about 8% faster, the bits differ call to call); cuda/sd_compute_attention_cudnn.cu"},
	{CUDNNLog, "0", CUDA, "1: print the cuDNN engines tried and chosen for attention to stderr"},
	{NoCUDNN, "0", Test, "1: cuda/build.sh and the check scripts build the library without cuDNN even where they find it"},

	{LaunchTest, "", Test, "marks a test binary that comm/launch/launchtest started as a PE, and its job"},
	{LaunchTestN, "", Test, "launchtest.Bench: the parent benchmark's b.N"},
	{MPITest, "", Test, "marks a test binary that comm/mpi's tests started under mpirun"},
	{MPITestCount, "MPI's int", Test, "comm/mpi tests: the largest count ReduceScatter and AllGather pass to MPI"},
	{GPUPEs, "1,2,4,8", Test, "comm/nvshmem GPU tests: the PE counts of the multi-PE tests"},
	{TestMPS, "", Test, "comm/nvshmem GPU tests: 1 when an MPS daemon serves the PEs"},
}

var byName = func() map[string]Var {
	m := make(map[string]Var, len(table))
	for _, v := range table {
		if _, dup := m[v.Name]; dup {
			panic("settings: " + v.Name + " declared twice")
		}
		m[v.Name] = v
	}
	return m
}()

// All returns every declared variable, grouped by reader.
func All() []Var { return append([]Var(nil), table...) }

// Declared reports whether name is in the table.
func Declared(name string) bool {
	_, ok := byName[name]
	return ok
}

// Lookup is os.LookupEnv for a declared variable. An undeclared name is a
// programming error: it panics, so that no variable is read without being
// listed.
func Lookup(name string) (string, bool) {
	if !Declared(name) {
		panic("settings: " + name + " is not declared in internal/settings")
	}
	return os.LookupEnv(name)
}

// Get is os.Getenv for a declared variable (see Lookup): "" when unset.
func Get(name string) string {
	v, _ := Lookup(name)
	return v
}

// WriteHelp lists the variables by reader, one line each with its meaning
// and its default, and marks those set in the current environment.
func WriteHelp(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Environment variables (docs/ENV.md):")
	var last Reader
	for _, v := range table {
		if v.Reader != last {
			fmt.Fprintf(tw, "\n%s:\n", v.Reader)
			last = v.Reader
		}
		var notes []string
		if v.Default != "" {
			notes = append(notes, "default "+v.Default)
		}
		if cur, ok := os.LookupEnv(v.Name); ok {
			notes = append(notes, fmt.Sprintf("now %q", cur))
		}
		note := ""
		if len(notes) > 0 {
			note = " [" + strings.Join(notes, "; ") + "]"
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", v.Name, v.Meaning, note)
	}
	return tw.Flush()
}
