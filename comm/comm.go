// Package comm is symddp's PGAS runtime: a small NVSHMEM-style interface over
// a symmetric heap that every processing element (PE) of a job can read and
// write. The trainer (package ddp) uses it for its parameter and gradient
// arenas; a program that only trains a model needs no more of it than the
// Comm that ddp.Launch hands to each PE.
//
// # Jobs and PEs
//
// A job has NPEs() processing elements, one process each, numbered 0 to
// NPEs()-1 (MyPE). The processes of a job on one host are started by
// comm/launch (used by `train --pes N` and ddp.Launch), which tells each
// one its PE number, the job's size and the heap through SYMDDP_*
// environment variables ([ConfigFromEnv] reads them back); across hosts
// mpirun starts them. A one-PE job needs no launcher:
// Open("shm", Config{NPEs: 1}) opens one in the calling process.
//
// # Symmetric buffers
//
// Alloc is collective: every PE calls it with the same kind and length, in
// the same order, and gets a handle on a buffer that exists at the same
// offset on every PE. One-sided operations (Put*, Get*, P, G, PutSignal)
// reach into a peer's copy of such a buffer without the peer taking part;
// collectives (Barrier, AllReduce, IAllReduce, Reduce, Broadcast) must be
// called by every PE in the same order. A buffer of a host backend is also
// a [HostBuffer], whose local copy is a Go slice aliasing the heap (the
// trainer's arenas are views of it); one of a device backend is a
// [DeviceBuffer].
//
// AllReduce leaves identical bits on every PE. Backends that also fix the
// order of the sum (see [FixedOrderer]) give the same bits as each other,
// which the conformance suite in comm/commtest checks for every backend.
//
// # Backends
//
// Backends live in sub-packages and register themselves by name when
// imported ([Register], [Backends], [Open]):
//
//	comm/shm      CPU, one host, PEs are processes sharing a /dev/shm heap (default)
//	comm/nvshmem  GPU, NVSHMEM + CUDA through the project's C-ABI library
//	comm/mpi      CPU across hosts over MPI (build tag "mpi")
//
// # Errors
//
// Misuse returns an error that wraps one of the sentinel errors below (test
// with errors.Is), never a crash: use after Close, a second Init, a foreign
// buffer, a PE out of range, an offset or length past the buffer. A wait that
// passes its deadline returns a *TimeoutError naming the PEs that did not
// arrive; a wait on a PE that died returns an error wrapping ErrPeerFailed
// on backends that can tell (shm and nvshmem do).
//
// # Desync detection
//
// Collectives must be called by every PE in the same order with the same
// arguments. Backends that check it (shm, mpi and nvshmem; see
// [DesyncChecking]) compare a fingerprint of every collective at its entry —
// its number, the operation, the reduction operator or root, the buffer and
// the range — and a PE whose call differs from its peers' ends the
// collective on every PE at once with an error wrapping ErrDesync that names
// the PEs and their calls, instead of a hang until the deadline or silently
// mixed data. The error is sticky: the runtime is unusable afterwards, as
// after a timeout.
package comm

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is the element type of a symmetric buffer.
type Kind uint8

// Element kinds. Float32 is what gradients and parameters use; BFloat16 is
// reduced only by device backends; Byte is raw storage; Uint64 holds signal
// words for PutSignal and WaitUntil.
const (
	Float32 Kind = iota + 1
	BFloat16
	Byte
	Uint64
)

// Size is the size of one element of kind k in bytes.
func (k Kind) Size() int {
	switch k {
	case Float32:
		return 4
	case BFloat16:
		return 2
	case Byte:
		return 1
	case Uint64:
		return 8
	}
	return 0
}

// String is the kind's name ("float32").
func (k Kind) String() string {
	switch k {
	case Float32:
		return "float32"
	case BFloat16:
		return "bfloat16"
	case Byte:
		return "byte"
	case Uint64:
		return "uint64"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Op is a reduction operator.
type Op uint8

// Reduction operators. Mean is Sum divided by NPEs(), in float32: each element
// is the backend's float32 Sum of that element divided by float32(NPEs()), one
// correctly rounded division (not a multiplication by 1/NPEs()). Max and Min
// follow Go's built-in max and min: a NaN anywhere gives NaN, and -0 < +0.
const (
	Sum Op = iota + 1
	Mean
	Max
	Min
)

// String is the operator's name ("sum").
func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Mean:
		return "mean"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// SignalOp is how PutSignal updates the signal word.
type SignalOp uint8

// Signal operations, as NVSHMEM_SIGNAL_SET and NVSHMEM_SIGNAL_ADD.
const (
	SignalSet SignalOp = iota + 1
	SignalAdd
)

// Cmp is the comparison WaitUntil applies to a signal word.
type Cmp uint8

// Comparisons for WaitUntil, as NVSHMEM_CMP_*.
const (
	CmpEQ Cmp = iota + 1
	CmpNE
	CmpGT
	CmpGE
	CmpLT
	CmpLE
)

// Holds reports whether v cmp target holds.
func (c Cmp) Holds(v, target uint64) bool {
	switch c {
	case CmpEQ:
		return v == target
	case CmpNE:
		return v != target
	case CmpGT:
		return v > target
	case CmpGE:
		return v >= target
	case CmpLT:
		return v < target
	case CmpLE:
		return v <= target
	}
	return false
}

// Buffer is a handle on a symmetric allocation. Handles are only valid with
// the Comm that made them.
type Buffer interface {
	// Kind is the element type.
	Kind() Kind
	// Len is the number of elements.
	Len() int
}

// HostBuffer is implemented by buffers whose local copy lives in host memory
// (shm, mpi). The slices alias the symmetric heap: writes are seen by peers.
// They are nil once the buffer is freed or its Comm closed, and must not be
// kept past Free or Close.
type HostBuffer interface {
	Buffer
	// Float32s is the local copy as float32; nil unless Kind() is Float32.
	Float32s() []float32
	// Uint64s is the local copy as uint64; nil unless Kind() is Uint64.
	Uint64s() []uint64
	// Bytes is the local copy as raw bytes (every kind).
	Bytes() []byte
}

// DeviceBuffer is implemented by buffers that live in accelerator memory.
type DeviceBuffer interface {
	Buffer
	// DevicePtr is the address of the local copy in device memory.
	DevicePtr() uintptr
}

// Request is an operation in flight, returned by IAllReduce and
// Sharder.IReduceScatter.
type Request interface {
	// Wait blocks until the operation is complete on this PE and returns its error.
	Wait() error
}

// FixedOrderer is implemented by backends that declare their Sum's order of
// addition: when FixedOrder() is true, element i of a Sum is exactly the
// float32 left fold ((x0[i] + x1[i]) + x2[i]) + ... over PEs 0, 1, ..., NPEs()-1,
// so results are reproducible bit for bit across backends that declare it.
// The conformance suite (comm/commtest) then checks Sum and Mean exactly.
type FixedOrderer interface {
	// FixedOrder reports whether Sum is the left fold in PE order.
	FixedOrder() bool
}

// DeviceSharer is implemented by GPU backends that know whether PEs of the
// job share a GPU (several PEs a GPU under MPS, or taking turns without it).
// SharesDevice gives the same answer on every PE. ddp's device step path
// overlaps gradient reduction with backward by default only where each PE
// has a GPU of its own: on a shared GPU the reduction runs on the SMs that
// backward needs.
type DeviceSharer interface {
	SharesDevice() bool
}

// Sharder is implemented by backends that can split an allreduce in two
// around work that each PE does on its own part of a buffer, as a sharded
// optimizer update (ZeRO stage 1) does: ReduceScatter leaves each PE with
// the reduced values of its shard only, the PE updates that shard, and
// AllGather copies every PE's shard into every PE's copy. PE p's shard of
// elements [off, off+n) is [Shard(off, n, NPEs(), p)). Both are collective
// and complete on return, like AllReduce. IReduceScatter splits the
// reduce-scatter further, into parts started as their data is ready (the
// gradient buckets of a backward pass), each complete when its Request's
// Wait returns.
type Sharder interface {
	// ReduceScatter reduces elements [off, off+n) of the Float32 buffer b
	// across PEs and writes the result into this PE's shard of its own
	// copy, with the same arithmetic and bits as AllReduce; the rest of
	// this PE's copy of [off, off+n) is left as it was.
	ReduceScatter(b Buffer, off, n int, op Op) error
	// IReduceScatter starts the reduce-scatter of the part [lo, hi) of
	// elements [off, off+n) of the Float32 buffer b and returns at once:
	// every PE p ends with the reduced values of [lo, hi) ∩ Shard(off, n,
	// NPEs(), p), the elements of its own shard in the part, in its own
	// copy; the rest of its copy is left as it was. Parts that together
	// cover [off, off+n) leave every PE what ReduceScatter(b, off, n, op)
	// leaves it, with the same arithmetic and bits. Collectives issued
	// after it run after it (as after IAllReduce); do not touch [lo, hi)
	// until Wait returns. off <= lo <= hi <= off+n.
	IReduceScatter(b Buffer, off, n, lo, hi int, op Op) (Request, error)
	// AllGather copies PE p's shard of elements [off, off+n) of b (any
	// kind) from PE p's copy into every PE's copy, for every p.
	AllGather(b Buffer, off, n int) error
}

// ShardAlign is the element alignment of the inner shard boundaries: 16
// elements, one 64-byte cache line of float32.
const ShardAlign = 16

// Shard is PE p's part [lo, hi) of elements [off, off+n) split among npes
// PEs: nearly equal parts whose inner boundaries are rounded up to a
// multiple of ShardAlign elements (counted from the buffer's start), so that
// no two PEs write one cache line of a Float32 buffer (shards of narrower
// kinds may share a line: slower, never wrong). Parts at the end may be empty when n is
// small. A range at an offset that is a multiple of ShardAlign is split the
// same way wherever it lies: Shard(off+k, n, npes, p) = k + Shard(off, n,
// npes, p) for k a multiple of ShardAlign.
func Shard(off, n, npes, p int) (lo, hi int) {
	bound := func(k int) int {
		if k == npes {
			return off + n
		}
		x := off + int(int64(n)*int64(k)/int64(npes))
		if k > 0 {
			x = (x + ShardAlign - 1) / ShardAlign * ShardAlign
		}
		return min(x, off+n)
	}
	return bound(p), bound(p + 1)
}

// PartShard is PE p's piece of the part [lo, hi) of elements [off, off+n)
// split among npes PEs: Shard(off, n, npes, p) with both ends clamped to
// [lo, hi], empty where the two do not meet. The pieces of PEs 0, 1, ...,
// npes-1 tile [lo, hi) in order. It is what Sharder.IReduceScatter leaves
// PE p.
func PartShard(off, n, npes, p, lo, hi int) (plo, phi int) {
	slo, shi := Shard(off, n, npes, p)
	return min(max(slo, lo), hi), min(max(shi, lo), hi)
}

// Comm is one PE's handle on the runtime. Offsets and lengths are in elements
// of the buffer's kind. A Comm is used by one goroutine at a time, except that
// an IAllReduce may be in flight while the caller computes.
type Comm interface {
	// MyPE is this PE's number, 0 <= MyPE() < NPEs().
	MyPE() int
	// NPEs is the number of PEs in the job.
	NPEs() int
	// Backend is the backend's name ("shm", "nvshmem", "mpi").
	Backend() string

	// Alloc collectively allocates n elements of kind on every PE, zeroed.
	// PEs that ask for different kinds or lengths all get an error wrapping
	// ErrSizeMismatch; a request larger than what is left of the heap wraps
	// ErrHeapExhausted.
	Alloc(kind Kind, n int) (Buffer, error)
	// Free collectively releases a buffer. A buffer not made by this Comm, or
	// freed already, gives ErrNotSymmetric.
	Free(b Buffer) error

	// PutFloat32 copies src into PE pe's copy of dst at element off.
	PutFloat32(dst Buffer, off int, src []float32, pe int) error
	// GetFloat32 copies len(dst) elements of PE pe's copy of src from off into dst.
	GetFloat32(dst []float32, src Buffer, off int, pe int) error
	// PutBytes copies src into PE pe's copy of a Byte buffer at off.
	PutBytes(dst Buffer, off int, src []byte, pe int) error
	// GetBytes copies from PE pe's copy of a Byte buffer at off into dst.
	GetBytes(dst []byte, src Buffer, off int, pe int) error
	// P stores one float32 into PE pe's copy of dst at off (nvshmem_float_p).
	P(dst Buffer, off int, v float32, pe int) error
	// G loads one float32 from PE pe's copy of src at off (nvshmem_float_g).
	G(src Buffer, off int, pe int) (float32, error)
	// PutSignal copies src into PE pe's copy of dst at off and then, ordered
	// after the data, updates signal word sigIdx of the Uint64 buffer sig on pe
	// with op and value (nvshmem_putmem_signal).
	PutSignal(dst Buffer, off int, src []float32, sig Buffer, sigIdx int, value uint64, op SignalOp, pe int) error
	// WaitUntil blocks until this PE's signal word sigIdx of sig satisfies
	// cmp against value, or the deadline passes.
	WaitUntil(sig Buffer, sigIdx int, cmp Cmp, value uint64) error
	// Fence orders this PE's puts to each peer: puts issued before it are
	// delivered before puts issued after it.
	Fence() error
	// Quiet waits until all of this PE's puts are complete and visible.
	Quiet() error

	// Barrier waits until every PE has called Barrier; it also completes
	// outstanding puts (as nvshmem_barrier_all).
	Barrier() error
	// AllReduce reduces elements [off, off+n) of b across PEs in place.
	// Every PE ends with identical bits (a fixed summation order).
	AllReduce(b Buffer, off, n int, op Op) error
	// IAllReduce starts AllReduce and returns at once. Collectives issued
	// after it run after it. Do not touch [off, off+n) until Wait returns.
	IAllReduce(b Buffer, off, n int, op Op) (Request, error)
	// Reduce reduces [off, off+n) of b across PEs into root's copy; the
	// other PEs' copies are left unchanged.
	Reduce(b Buffer, off, n int, op Op, root int) error
	// Broadcast copies root's elements [off, off+n) of b to every PE.
	Broadcast(b Buffer, off, n int, root int) error

	// Close releases the runtime. Every later call returns ErrClosed.
	// Close is collective when every PE is healthy, but never blocks past
	// the deadline.
	Close() error
}

// Sentinel errors. Backends wrap them with context.
var (
	ErrClosed             = errors.New("comm: used after Close")
	ErrAlreadyInitialised = errors.New("comm: runtime already initialised in this process")
	ErrNotSymmetric       = errors.New("comm: buffer is not a live symmetric allocation of this runtime")
	ErrPERange            = errors.New("comm: PE number out of range")
	ErrBounds             = errors.New("comm: offset or length past the end of the buffer")
	ErrKind               = errors.New("comm: operation does not support this buffer kind")
	ErrSizeMismatch       = errors.New("comm: PEs asked for different allocations")
	ErrHeapExhausted      = errors.New("comm: symmetric heap exhausted")
	ErrTimeout            = errors.New("comm: deadline passed")
	ErrPeerFailed         = errors.New("comm: a peer PE failed")
	ErrDesync             = errors.New("comm: PEs called different collectives (desync)")
	ErrUnavailable        = errors.New("comm: backend not available on this machine")
)

// TimeoutError says which wait passed its deadline and which PEs had not
// arrived. It wraps ErrTimeout.
type TimeoutError struct {
	PE       int           // the PE that gave up
	Op       string        // "barrier", "allreduce", ...
	Missing  []int         // PEs that had not arrived
	Deadline time.Duration // how long it waited
}

// Error says which PE gave up on which wait, after how long, and who was
// missing.
func (e *TimeoutError) Error() string {
	ids := make([]string, len(e.Missing))
	for i, m := range e.Missing {
		ids[i] = fmt.Sprint(m)
	}
	return fmt.Sprintf("comm: PE %d: %s: deadline of %v passed; PEs not arrived: [%s]",
		e.PE, e.Op, e.Deadline, strings.Join(ids, " "))
}

// Unwrap makes errors.Is(err, ErrTimeout) true.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// CheckRange returns an error wrapping ErrBounds unless [off, off+n) lies in
// a buffer of length size. Backends share it so that messages agree.
func CheckRange(op string, b Buffer, off, n int) error {
	if off < 0 || n < 0 || off > b.Len() || n > b.Len()-off {
		return fmt.Errorf("%s: range [%d, %d) of a %d-element %s buffer: %w", op, off, off+n, b.Len(), b.Kind(), ErrBounds)
	}
	return nil
}

// CheckPart returns an error wrapping ErrBounds unless [off, off+n) lies in
// b and [lo, hi) in [off, off+n): the arguments of Sharder.IReduceScatter.
func CheckPart(op string, b Buffer, off, n, lo, hi int) error {
	if err := CheckRange(op, b, off, n); err != nil {
		return err
	}
	if lo < off || hi < lo || hi > off+n {
		return fmt.Errorf("%s: part [%d, %d) of range [%d, %d): %w", op, lo, hi, off, off+n, ErrBounds)
	}
	return nil
}

// CheckPE returns an error wrapping ErrPERange unless 0 <= pe < npes.
func CheckPE(op string, pe, npes int) error {
	if pe < 0 || pe >= npes {
		return fmt.Errorf("%s: PE %d of %d: %w", op, pe, npes, ErrPERange)
	}
	return nil
}

// Config is what every backend's constructor takes. Zero values mean the
// documented defaults; Env fills the rest from the launcher's environment.
type Config struct {
	// PE and NPEs: this process's PE number and the job's size.
	PE, NPEs int
	// HeapName names the job's symmetric heap (shm: the file under /dev/shm).
	HeapName string
	// HeapSize is the size in bytes of each PE's symmetric heap (default
	// 1 GiB for shm).
	HeapSize int64
	// Timeout is the deadline of every wait (default DefaultTimeout).
	Timeout time.Duration
	// RunDir is a directory private to the job (unique-id files, logs).
	RunDir string
	// Options carries backend-specific settings (for example the path of
	// the GPU library).
	Options map[string]string
}

// DefaultTimeout is the deadline of a wait when Config.Timeout is zero.
const DefaultTimeout = 5 * time.Minute

// Constructor opens a backend for one PE.
type Constructor func(cfg Config) (Comm, error)

var (
	regMu    sync.Mutex
	registry = map[string]Constructor{}
)

// Register makes a backend available to Open under name. Backends call it
// from init; registering a name twice panics (a programming error).
func Register(name string, c Constructor) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("comm: backend registered twice: " + name)
	}
	registry[name] = c
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	regMu.Lock()
	defer regMu.Unlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open starts backend name for one PE.
func Open(name string, cfg Config) (Comm, error) {
	regMu.Lock()
	c, ok := registry[name]
	regMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("comm: unknown backend %q (built in: %s)", name, strings.Join(Backends(), ", "))
	}
	return c(cfg)
}
