package cudalib

import (
	"time"

	"github.com/symddp/symddp/internal/settings"
)

// LibName is the library's file name.
const LibName = "libsymddp_cuda.so"

// EnvLib names the environment variable that holds the library's path.
const EnvLib = settings.CUDALib

// CallWords is the number of words of a collective's fingerprint
// (SD_CALL_WORDS; Lib.SetCall).
const CallWords = 5

// TraceSlots is the number of slots of the library's overlap trace
// (SD_TRACE_SLOTS; Lib.TraceStamp).
const TraceSlots = 4096

// DType is the element type of a reduction (SD_F32, SD_BF16) or of a
// compute operation that takes one (SDC_F32, SDC_BF16: the same numbers).
type DType int32

// Element types.
const (
	Float32  DType = 1
	BFloat16 DType = 2
)

// Size is the size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case Float32:
		return 4
	case BFloat16:
		return 2
	}
	return 0
}

// Op is a reduction operator (SD_SUM ...): the numbers of comm.Op.
type Op int32

// Reduction operators.
const (
	Sum  Op = 1
	Mean Op = 2
	Max  Op = 3
	Min  Op = 4
)

// Algo picks the allreduce algorithm (SD_ALGO_*).
type Algo int32

// Allreduce algorithms.
const (
	// Auto is one-shot up to the one-shot limit, two-shot above it.
	Auto Algo = 0
	// OneShot: every PE reduces the whole range from every peer.
	OneShot Algo = 1
	// TwoShot: reduce-scatter into owner slices, then all-gather.
	TwoShot Algo = 2
	// NVSHMEM is NVSHMEM's on-stream team reduction (the fallback for peers
	// out of pointer reach). It aborts the process in NVSHMEM's "limited
	// MPG" mode (several PEs on one GPU without MPS).
	NVSHMEM Algo = 3
)

func (a Algo) String() string {
	switch a {
	case Auto:
		return "auto"
	case OneShot:
		return "one-shot"
	case TwoShot:
		return "two-shot"
	case NVSHMEM:
		return "nvshmem"
	}
	return "algo?"
}

// Bootstrap is how Init starts NVSHMEM (SD_BOOT_*).
type Bootstrap int32

// Bootstraps.
const (
	// UniqueID: PE 0's unique id (UniqueID) handed to the others out of band.
	UniqueID Bootstrap = 1
	// MPI: NVSHMEM_BOOTSTRAP=MPI, for processes started by mpirun.
	MPI Bootstrap = 2
	// PMIx: NVSHMEM_BOOTSTRAP=PMI with PMIx.
	PMIx Bootstrap = 3
)

// SignalOp is how PutSignal updates the signal word.
type SignalOp int32

// Signal operations.
const (
	SignalSet SignalOp = 1
	SignalAdd SignalOp = 2
)

// InitArgs are Init's arguments (sd_init_args).
type InitArgs struct {
	Bootstrap Bootstrap
	// PE and NPEs: this PE and the job's size (unique-id bootstrap).
	PE, NPEs int
	// LocalPE is the PE's number on this host; it picks the GPU
	// (LocalPE mod the number of GPUs) unless Device is set.
	LocalPE int
	// Device is the GPU to use, or -1.
	Device int
	// SingleNode sets NVSHMEM_REMOTE_TRANSPORT=none unless the user set it.
	SingleNode bool
	// HeapBytes is the symmetric heap the caller will use (the library adds
	// its own room); 0 leaves NVSHMEM's default.
	HeapBytes int64
	// Timeout is the deadline of every in-kernel wait (0: 5 minutes).
	Timeout time.Duration
	// UID is PE 0's unique id (unique-id bootstrap).
	UID []byte
}

// Info is what Init reports (sd_info).
type Info struct {
	PE, NPEs       int
	Device         int
	DeviceCount    int
	SMCount        int
	MaxBlocks      int  // blocks per collective kernel, agreed by all PEs
	AllReachable   bool // every PE reaches every peer by pointer
	NVSHMEMVersion [3]int
	CUDARuntime    int
	CUDADriver     int
	DeviceName     string
}

// Event is a CUDA event recorded on the library's stream.
type Event uint64
