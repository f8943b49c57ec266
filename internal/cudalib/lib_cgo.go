//go:build cgo

package cudalib

/*
#cgo LDFLAGS: -ldl
#cgo CFLAGS: -I${SRCDIR}/../../cuda
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib_gen.h"

// sdw_dlopen and sdw_bind are shared with compute_cgo.go, which declares
// them: not static, defined in this preamble only (so no //export in this
// file, which would copy the preamble into a second object).

// sdw_dlopen loads the library at path (or returns the handle of the loaded
// one); on failure it returns NULL with dlerror's message in err.
void *sdw_dlopen(const char *path, char *err, size_t cap) {
	void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		const char *m = dlerror();
		snprintf(err, cap, "%s", m ? m : "dlopen failed");
	}
	return h;
}

// sdw_bind looks up the n names in h into fn and writes the missing ones,
// space-separated, into err. It returns how much it wrote: 0 when every name
// was found.
size_t sdw_bind(void *h, const char *const *names, int n, void **fn, char *err, size_t cap) {
	size_t used = 0;
	for (int i = 0; i < n; i++) {
		fn[i] = dlsym(h, names[i]);
		if (!fn[i] && used < cap) {
			int k = snprintf(err + used, cap - used, "%s%s", used ? " " : "", names[i]);
			if (k > 0) used += (size_t)k;
		}
	}
	return used;
}

// sdw_open loads the library and binds every entry point; on failure it
// returns NULL with the reason in err.
static sdw_table *sdw_open(const char *path, char *err, size_t cap) {
	void *h = sdw_dlopen(path, err, cap);
	if (!h) return NULL;
	sdw_table *t = (sdw_table *)calloc(1, sizeof *t);
	if (!t) {
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	t->handle = h;
	if (sdw_bind(h, sdw_names, SDI_count, t->fn, err, cap)) {
		free(t);
		return NULL; // the library stays loaded: dlclose of CUDA code is not safe
	}
	return t;
}

*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Lib is the loaded library. Its methods may be called from any goroutine,
// but the runtime behind them is one per process: callers serialise.
type Lib struct {
	path string
	t    *C.sdw_table
	// errBufs holds C buffers for the error message of a call, so that a
	// call (several per training step) allocates nothing on the Go heap: a
	// Go buffer handed to C escapes to the heap.
	errBufs chan *C.char
}

// errBufLen is the size of an error-message buffer; errBufCount how many
// calls may be in flight at once before a call falls back to a Go buffer.
const (
	errBufLen   = 1024
	errBufCount = 8
)

// SymBuf is a symmetric allocation (sd_buf) made by Lib.Alloc.
type SymBuf struct {
	h     *C.sd_buf
	ptr   uintptr
	bytes int
}

// Ptr is the device address of this PE's copy.
func (b *SymBuf) Ptr() uintptr { return b.ptr }

// Bytes is the allocation's size.
func (b *SymBuf) Bytes() int { return b.bytes }

var (
	loadMu sync.Mutex
	loaded = map[string]*Lib{}
)

// Load finds the library (see Candidates), loads it once per process and
// checks its ABI version. The error says where it looked and how to build it.
func Load(explicit string) (*Lib, error) {
	var tried []string
	for _, p := range Candidates(explicit) {
		abs, err := filepath.Abs(p)
		if err != nil {
			abs = p
		}
		if fi, err := os.Stat(abs); err != nil || fi.IsDir() {
			tried = append(tried, p)
			continue
		}
		return open(abs)
	}
	return nil, fmt.Errorf("%w: %w: %s not found (looked in %s); build it on a GPU host with cuda/build.sh and set %s to its path",
		ErrUnavailable, ErrNotFound, LibName, strings.Join(tried, ", "), EnvLib)
}

// open loads the library at path (absolute), once.
func open(path string) (*Lib, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if l, ok := loaded[path]; ok {
		return l, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [1024]byte
	t := C.sdw_open(cpath, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	if t == nil {
		msg := cstr(buf[:])
		if strings.Contains(msg, "libcuda.so") {
			return nil, fmt.Errorf("%w: %w: load %s: %s (no NVIDIA driver on this machine)", ErrUnavailable, ErrNoDevice, path, msg)
		}
		if !strings.HasPrefix(msg, "sd_") {
			return nil, fmt.Errorf("%w: load %s: %s", ErrUnavailable, path, msg)
		}
		return nil, fmt.Errorf("%w: %s lacks entry points %s: rebuild it with cuda/build.sh", ErrUnavailable, path, msg)
	}
	if v := int(C.w_abi_version(t)); v != ABIVersion {
		C.free(unsafe.Pointer(t))
		return nil, fmt.Errorf("%w: %s has C ABI %d, this program speaks %d: rebuild it with cuda/build.sh", ErrUnavailable, path, v, ABIVersion)
	}
	l := &Lib{path: path, t: t, errBufs: make(chan *C.char, errBufCount)}
	for i := 0; i < errBufCount; i++ {
		l.errBufs <- (*C.char)(C.malloc(errBufLen)) // lives as long as the loaded library
	}
	loaded[path] = l
	return l, nil
}

// cstr is the NUL-terminated string at the start of b.
func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// call runs f with an error buffer and turns its status into an error.
func (l *Lib) call(name string, f func(err *C.char, n C.size_t) C.int) error {
	var buf *C.char
	select {
	case buf = <-l.errBufs:
		defer func() { l.errBufs <- buf }()
	default: // every buffer in use (concurrent calls): a buffer of our own
		b := make([]byte, errBufLen)
		buf = (*C.char)(unsafe.Pointer(&b[0]))
	}
	*buf = 0
	rc := f(buf, errBufLen)
	if int(rc) == statusOK {
		return nil
	}
	return callError(name, int(rc), C.GoString(buf))
}

// bytesPtr is the address of b's first byte, or nil when b is empty.
func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// Path is the file the library was loaded from.
func (l *Lib) Path() string { return l.path }

// ABIVersion is the library's SD_ABI_VERSION.
func (l *Lib) ABIVersion() int { return int(C.w_abi_version(l.t)) }

// DeviceCount is the number of CUDA devices; an error wrapping ErrNoDevice
// when there is no GPU or driver.
func (l *Lib) DeviceCount() (int, error) {
	var n C.int32_t
	err := l.call("sd_device_count", func(e *C.char, c C.size_t) C.int { return C.w_device_count(l.t, e, c, &n) })
	return int(n), err
}

// UniqueID returns a fresh NVSHMEM unique id (PE 0 of a unique-id bootstrap).
func (l *Lib) UniqueID() ([]byte, error) {
	var n C.size_t
	if err := l.call("sd_uniqueid_size", func(e *C.char, c C.size_t) C.int { return C.w_uniqueid_size(l.t, e, c, &n) }); err != nil {
		return nil, err
	}
	id := make([]byte, int(n))
	err := l.call("sd_get_uniqueid", func(e *C.char, c C.size_t) C.int {
		return C.w_get_uniqueid(l.t, e, c, bytesPtr(id), n)
	})
	if err != nil {
		return nil, err
	}
	return id, nil
}

// Init selects the GPU and starts NVSHMEM and the library's runtime.
func (l *Lib) Init(a InitArgs) (Info, error) {
	var args C.sd_init_args
	args.bootstrap = C.int32_t(a.Bootstrap)
	args.pe = C.int32_t(a.PE)
	args.npes = C.int32_t(a.NPEs)
	args.local_pe = C.int32_t(a.LocalPE)
	args.device = C.int32_t(a.Device)
	if a.SingleNode {
		args.single_node = 1
	}
	args.heap_bytes = C.int64_t(a.HeapBytes)
	args.timeout_ns = C.int64_t(a.Timeout.Nanoseconds())
	if len(a.UID) > 0 {
		uid := C.CBytes(a.UID) // C memory: the struct may not hold a Go pointer
		defer C.free(uid)
		args.uid = uid
		args.uid_len = C.size_t(len(a.UID))
	}
	var info C.sd_info
	if err := l.call("sd_init", func(e *C.char, c C.size_t) C.int { return C.w_init(l.t, e, c, &args, &info) }); err != nil {
		return Info{}, err
	}
	return Info{
		PE:           int(info.pe),
		NPEs:         int(info.npes),
		Device:       int(info.device),
		DeviceCount:  int(info.device_count),
		SMCount:      int(info.sm_count),
		MaxBlocks:    int(info.max_blocks),
		AllReachable: info.all_reachable != 0,
		NVSHMEMVersion: [3]int{
			int(info.nvshmem_major), int(info.nvshmem_minor), int(info.nvshmem_patch),
		},
		CUDARuntime: int(info.cuda_runtime),
		CUDADriver:  int(info.cuda_driver),
		DeviceName:  C.GoString(&info.device_name[0]),
	}, nil
}

// Finalize ends the runtime; collective waits for every PE (with the
// deadline) and finalizes NVSHMEM, otherwise only local resources go.
func (l *Lib) Finalize(collective bool) error {
	c32 := C.int32_t(0)
	if collective {
		c32 = 1
	}
	return l.call("sd_finalize", func(e *C.char, c C.size_t) C.int { return C.w_finalize(l.t, e, c, c32) })
}

// Stream is the library's CUDA stream (a cudaStream_t).
func (l *Lib) Stream() (uintptr, error) {
	var s C.uint64_t
	err := l.call("sd_stream", func(e *C.char, c C.size_t) C.int { return C.w_stream(l.t, e, c, &s) })
	return uintptr(s), err
}

// SetTimeout sets the deadline of in-kernel waits.
func (l *Lib) SetTimeout(d time.Duration) error {
	return l.call("sd_set_timeout", func(e *C.char, c C.size_t) C.int {
		return C.w_set_timeout(l.t, e, c, C.int64_t(d.Nanoseconds()))
	})
}

// SetOneShotMax sets the largest buffer (bytes) the automatic allreduce
// reduces one-shot.
func (l *Lib) SetOneShotMax(bytes int) error {
	return l.call("sd_set_one_shot_max", func(e *C.char, c C.size_t) C.int {
		return C.w_set_one_shot_max(l.t, e, c, C.size_t(bytes))
	})
}

// Alloc collectively allocates bytes of zeroed symmetric memory.
func (l *Lib) Alloc(bytes int) (*SymBuf, error) {
	var h *C.sd_buf
	if err := l.call("sd_alloc", func(e *C.char, c C.size_t) C.int { return C.w_alloc(l.t, e, c, C.size_t(bytes), &h) }); err != nil {
		return nil, err
	}
	var p C.uint64_t
	if err := l.call("sd_buf_ptr", func(e *C.char, c C.size_t) C.int { return C.w_buf_ptr(l.t, e, c, h, &p) }); err != nil {
		return nil, err
	}
	return &SymBuf{h: h, ptr: uintptr(p), bytes: bytes}, nil
}

// Free collectively frees b.
func (l *Lib) Free(b *SymBuf) error {
	return l.call("sd_free", func(e *C.char, c C.size_t) C.int { return C.w_free(l.t, e, c, b.h) })
}

// PeerPtr is PE pe's copy of b in this address space, 0 when out of pointer reach.
func (l *Lib) PeerPtr(b *SymBuf, pe int) (uintptr, error) {
	var p C.uint64_t
	err := l.call("sd_peer_ptr", func(e *C.char, c C.size_t) C.int { return C.w_peer_ptr(l.t, e, c, b.h, C.int32_t(pe), &p) })
	return uintptr(p), err
}

// Put copies src into PE pe's copy of b at byte off; complete on return.
func (l *Lib) Put(b *SymBuf, off int, src []byte, pe int) error {
	return l.call("sd_put", func(e *C.char, c C.size_t) C.int {
		return C.w_put(l.t, e, c, b.h, C.size_t(off), bytesPtr(src), C.size_t(len(src)), C.int32_t(pe))
	})
}

// Get copies len(dst) bytes of PE pe's copy of b at byte off into dst.
func (l *Lib) Get(dst []byte, b *SymBuf, off int, pe int) error {
	return l.call("sd_get", func(e *C.char, c C.size_t) C.int {
		return C.w_get(l.t, e, c, bytesPtr(dst), b.h, C.size_t(off), C.size_t(len(dst)), C.int32_t(pe))
	})
}

// PutSignal puts src into PE pe's copy of b at byte off, then updates the
// uint64 at byte sigOff of sig on pe with op and value, ordered after the data.
func (l *Lib) PutSignal(b *SymBuf, off int, src []byte, sig *SymBuf, sigOff int, value uint64, op SignalOp, pe int) error {
	return l.call("sd_put_signal", func(e *C.char, c C.size_t) C.int {
		return C.w_put_signal(l.t, e, c, b.h, C.size_t(off), bytesPtr(src), C.size_t(len(src)),
			sig.h, C.size_t(sigOff), C.uint64_t(value), C.int32_t(op), C.int32_t(pe))
	})
}

// ReadU64 reads this PE's uint64 at byte off of b.
func (l *Lib) ReadU64(b *SymBuf, off int) (uint64, error) {
	var v C.uint64_t
	err := l.call("sd_read_u64", func(e *C.char, c C.size_t) C.int { return C.w_read_u64(l.t, e, c, b.h, C.size_t(off), &v) })
	return uint64(v), err
}

// Quiet completes this PE's outstanding NVSHMEM puts and the stream's work.
func (l *Lib) Quiet() error {
	return l.call("sd_quiet", func(e *C.char, c C.size_t) C.int { return C.w_quiet(l.t, e, c) })
}

// BarrierEnqueue enqueues a barrier of all PEs.
func (l *Lib) BarrierEnqueue() error {
	return l.call("sd_barrier_enqueue", func(e *C.char, c C.size_t) C.int { return C.w_barrier_enqueue(l.t, e, c) })
}

// AllReduceEnqueue enqueues an in-place allreduce of n elements of dt at
// element off of b.
func (l *Lib) AllReduceEnqueue(b *SymBuf, off, n int, dt DType, op Op, algo Algo) error {
	return l.call("sd_allreduce_enqueue", func(e *C.char, c C.size_t) C.int {
		return C.w_allreduce_enqueue(l.t, e, c, b.h, C.size_t(off), C.size_t(n), C.int32_t(dt), C.int32_t(op), C.int32_t(algo))
	})
}

// ReduceEnqueue enqueues a reduction into root's copy.
func (l *Lib) ReduceEnqueue(b *SymBuf, off, n int, dt DType, op Op, root int) error {
	return l.call("sd_reduce_enqueue", func(e *C.char, c C.size_t) C.int {
		return C.w_reduce_enqueue(l.t, e, c, b.h, C.size_t(off), C.size_t(n), C.int32_t(dt), C.int32_t(op), C.int32_t(root))
	})
}

// BroadcastEnqueue enqueues a copy of root's bytes [off, off+n) of b to every PE.
func (l *Lib) BroadcastEnqueue(b *SymBuf, off, n int, root int) error {
	return l.call("sd_broadcast_enqueue", func(e *C.char, c C.size_t) C.int {
		return C.w_broadcast_enqueue(l.t, e, c, b.h, C.size_t(off), C.size_t(n), C.int32_t(root))
	})
}

// ReduceScatterEnqueue enqueues the reduction of this PE's shard, elements
// [lo, hi) of dt, across PEs into this PE's copy; span is the largest
// shard's length, the same on every PE.
func (l *Lib) ReduceScatterEnqueue(b *SymBuf, lo, hi, span int, dt DType, op Op) error {
	return l.call("sd_reduce_scatter_enqueue", func(e *C.char, c C.size_t) C.int {
		return C.w_reduce_scatter_enqueue(l.t, e, c, b.h, C.size_t(lo), C.size_t(hi), C.size_t(span), C.int32_t(dt), C.int32_t(op))
	})
}

// AllGatherEnqueue enqueues a copy of this PE's bytes [lo, hi) of b into
// every other PE's copy; span is the largest shard's length in bytes, the
// same on every PE.
func (l *Lib) AllGatherEnqueue(b *SymBuf, lo, hi, span int) error {
	return l.call("sd_allgather_enqueue", func(e *C.char, c C.size_t) C.int {
		return C.w_allgather_enqueue(l.t, e, c, b.h, C.size_t(lo), C.size_t(hi), C.size_t(span))
	})
}

// CommFork orders the collectives stream after the work enqueued on the
// stream so far and, until CommJoin, enqueues every collective there, each
// behind a one-block arrival barrier of all PEs (sd_comm_fork). Called again
// before CommJoin it orders the collectives stream after the stream's work
// once more.
func (l *Lib) CommFork() error {
	return l.call("sd_comm_fork", func(e *C.char, c C.size_t) C.int { return C.w_comm_fork(l.t, e, c) })
}

// CommJoin makes the stream wait for the collectives stream's work and sends
// collectives to the stream again (sd_comm_join).
func (l *Lib) CommJoin() error {
	return l.call("sd_comm_join", func(e *C.char, c C.size_t) C.int { return C.w_comm_join(l.t, e, c) })
}

// TraceSlots is the header's SD_TRACE_SLOTS.
var (
	_ [TraceSlots - C.SD_TRACE_SLOTS]struct{}
	_ [C.SD_TRACE_SLOTS - TraceSlots]struct{}
)

// TraceStamp enqueues a write of the GPU's nanosecond clock into slot of the
// trace, on the stream or (onComm, while forked) on the collectives stream.
func (l *Lib) TraceStamp(onComm bool, slot int) error {
	on := C.int32_t(0)
	if onComm {
		on = 1
	}
	return l.call("sd_trace_stamp", func(e *C.char, c C.size_t) C.int { return C.w_trace_stamp(l.t, e, c, on, C.int32_t(slot)) })
}

// TraceRead reads slots [0, len(out)) of the trace (after waiting for the
// work that wrote them).
func (l *Lib) TraceRead(out []uint64) error {
	if len(out) == 0 {
		return nil
	}
	return l.call("sd_trace_read", func(e *C.char, c C.size_t) C.int {
		return C.w_trace_read(l.t, e, c, (*C.uint64_t)(unsafe.Pointer(&out[0])), C.int32_t(len(out)))
	})
}

// AllGatherU64 gathers every PE's words (at most 8), PE by PE; blocking,
// with the library's deadline.
func (l *Lib) AllGatherU64(mine []uint64, npes int) ([]uint64, error) {
	if len(mine) == 0 {
		return nil, &Error{Call: "sd_allgather_u64", Status: statusArg, Msg: "no words"}
	}
	all := make([]uint64, npes*len(mine))
	err := l.call("sd_allgather_u64", func(e *C.char, c C.size_t) C.int {
		return C.w_allgather_u64(l.t, e, c, (*C.uint64_t)(unsafe.Pointer(&mine[0])), C.int32_t(len(mine)), (*C.uint64_t)(unsafe.Pointer(&all[0])))
	})
	return all, err
}

// AllGatherU64Enqueue enqueues an allgather of mine (at most 8 words).
func (l *Lib) AllGatherU64Enqueue(mine []uint64) error {
	if len(mine) == 0 {
		return &Error{Call: "sd_allgather_u64_enqueue", Status: statusArg, Msg: "no words"}
	}
	return l.call("sd_allgather_u64_enqueue", func(e *C.char, c C.size_t) C.int {
		return C.w_allgather_u64_enqueue(l.t, e, c, (*C.uint64_t)(unsafe.Pointer(&mine[0])), C.int32_t(len(mine)))
	})
}

// AllGatherU64Result collects a completed allgather of count words per PE
// into all (len npes*count).
func (l *Lib) AllGatherU64Result(all []uint64, count int) error {
	if len(all) == 0 || count <= 0 {
		return &Error{Call: "sd_allgather_u64_result", Status: statusArg, Msg: "no room"}
	}
	return l.call("sd_allgather_u64_result", func(e *C.char, c C.size_t) C.int {
		return C.w_allgather_u64_result(l.t, e, c, (*C.uint64_t)(unsafe.Pointer(&all[0])), C.int32_t(count))
	})
}

// SetCall makes w the fingerprint of the collective that the flag kernels
// enqueued from now on belong to (sd_set_call): each compares it with every
// peer's at its entry barrier, and a wait fails with ErrDesync when they
// differ. w[0] is the call's number; 0 turns the check off.
func (l *Lib) SetCall(w [CallWords]uint64) error {
	return l.call("sd_set_call", func(e *C.char, c C.size_t) C.int {
		return C.w_set_call(l.t, e, c, C.uint64_t(w[0]), C.uint64_t(w[1]), C.uint64_t(w[2]), C.uint64_t(w[3]), C.uint64_t(w[4]))
	})
}

// DesyncInfo gives, after a wait failed with ErrDesync, every PE's
// fingerprint of the collective where the PEs differed (PE by PE, at most
// maxPEs) and the operation whose kernel found it; no calls when none was
// found.
func (l *Lib) DesyncInfo(maxPEs int) (calls [][CallWords]uint64, op string, err error) {
	words := make([]C.uint64_t, max(maxPEs, 1)*CallWords)
	var n C.int32_t
	var opBuf [32]byte
	err = l.call("sd_desync_info", func(e *C.char, c C.size_t) C.int {
		return C.w_desync_info(l.t, e, c, &words[0], C.int32_t(len(words)), &n, (*C.char)(unsafe.Pointer(&opBuf[0])), C.size_t(len(opBuf)))
	})
	for p := 0; p < int(n) && (p+1)*CallWords <= len(words); p++ {
		var w [CallWords]uint64
		for i := range w {
			w[i] = uint64(words[p*CallWords+i])
		}
		calls = append(calls, w)
	}
	return calls, cstr(opBuf[:]), err
}

// StreamWait waits for the stream's work with a deadline.
func (l *Lib) StreamWait(timeout time.Duration) error {
	return l.call("sd_stream_wait", func(e *C.char, c C.size_t) C.int {
		return C.w_stream_wait(l.t, e, c, C.int64_t(timeout.Nanoseconds()))
	})
}

// StreamQuery reports whether the stream's work is done, without waiting.
func (l *Lib) StreamQuery() (bool, error) {
	var d C.int32_t
	err := l.call("sd_stream_query", func(e *C.char, c C.size_t) C.int { return C.w_stream_query(l.t, e, c, &d) })
	return d != 0, err
}

// EventRecord records an event on the stream.
func (l *Lib) EventRecord() (Event, error) {
	var ev C.uint64_t
	err := l.call("sd_event_record", func(e *C.char, c C.size_t) C.int { return C.w_event_record(l.t, e, c, &ev) })
	return Event(ev), err
}

// EventQuery reports whether ev has completed, without waiting.
func (l *Lib) EventQuery(ev Event) (bool, error) {
	var d C.int32_t
	err := l.call("sd_event_query", func(e *C.char, c C.size_t) C.int { return C.w_event_query(l.t, e, c, C.uint64_t(ev), &d) })
	return d != 0, err
}

// EventWait waits for ev with a deadline.
func (l *Lib) EventWait(ev Event, timeout time.Duration) error {
	return l.call("sd_event_wait", func(e *C.char, c C.size_t) C.int {
		return C.w_event_wait(l.t, e, c, C.uint64_t(ev), C.int64_t(timeout.Nanoseconds()))
	})
}

// EventDestroy releases ev.
func (l *Lib) EventDestroy(ev Event) error {
	return l.call("sd_event_destroy", func(e *C.char, c C.size_t) C.int { return C.w_event_destroy(l.t, e, c, C.uint64_t(ev)) })
}

// TimeoutInfo names, after a wait gave up, the PEs that had not arrived and
// the operation that waited.
func (l *Lib) TimeoutInfo(npes int) (missing []int, op string, err error) {
	m := make([]C.int32_t, max(npes, 1))
	var count C.int32_t
	var opBuf [32]byte
	err = l.call("sd_timeout_info", func(e *C.char, c C.size_t) C.int {
		return C.w_timeout_info(l.t, e, c, &m[0], C.int32_t(len(m)), &count, (*C.char)(unsafe.Pointer(&opBuf[0])), C.size_t(len(opBuf)))
	})
	for i := 0; i < int(count) && i < len(m); i++ {
		missing = append(missing, int(m[i]))
	}
	return missing, cstr(opBuf[:]), err
}

// Abandon tells the library that the caller gave up on a wait: collectives
// are refused from now on and Finalize does not wait for peers.
func (l *Lib) Abandon() error {
	return l.call("sd_abandon", func(e *C.char, c C.size_t) C.int { return C.w_abandon(l.t, e, c) })
}

// DevAlloc allocates plain (not symmetric) device memory.
func (l *Lib) DevAlloc(bytes int) (uintptr, error) {
	var p C.uint64_t
	err := l.call("sd_dev_alloc", func(e *C.char, c C.size_t) C.int { return C.w_dev_alloc(l.t, e, c, C.size_t(bytes), &p) })
	return uintptr(p), err
}

// DevFree frees memory from DevAlloc.
func (l *Lib) DevFree(p uintptr) error {
	return l.call("sd_dev_free", func(e *C.char, c C.size_t) C.int { return C.w_dev_free(l.t, e, c, C.uint64_t(p)) })
}

// CopyHtoD copies src to device address dst.
func (l *Lib) CopyHtoD(dst uintptr, src []byte) error {
	return l.call("sd_copy_htod", func(e *C.char, c C.size_t) C.int {
		return C.w_copy_htod(l.t, e, c, C.uint64_t(dst), bytesPtr(src), C.size_t(len(src)))
	})
}

// CopyDtoH copies len(dst) bytes from device address src.
func (l *Lib) CopyDtoH(dst []byte, src uintptr) error {
	return l.call("sd_copy_dtoh", func(e *C.char, c C.size_t) C.int {
		return C.w_copy_dtoh(l.t, e, c, bytesPtr(dst), C.uint64_t(src), C.size_t(len(dst)))
	})
}

// CopyDtoD copies bytes between device addresses.
func (l *Lib) CopyDtoD(dst, src uintptr, bytes int) error {
	return l.call("sd_copy_dtod", func(e *C.char, c C.size_t) C.int {
		return C.w_copy_dtod(l.t, e, c, C.uint64_t(dst), C.uint64_t(src), C.size_t(bytes))
	})
}

// Memset sets bytes of device memory at dst to v.
func (l *Lib) Memset(dst uintptr, v byte, bytes int) error {
	return l.call("sd_memset", func(e *C.char, c C.size_t) C.int {
		return C.w_memset(l.t, e, c, C.uint64_t(dst), C.int32_t(v), C.size_t(bytes))
	})
}

// TimeAllReduce times iters allreduces of the first n elements of b (after
// warmup ones) with CUDA events; collective. It returns the total time.
func (l *Lib) TimeAllReduce(b *SymBuf, n int, dt DType, op Op, algo Algo, warmup, iters int) (time.Duration, error) {
	var ms C.float
	err := l.call("sd_time_allreduce", func(e *C.char, c C.size_t) C.int {
		return C.w_time_allreduce(l.t, e, c, b.h, C.size_t(n), C.int32_t(dt), C.int32_t(op), C.int32_t(algo), C.int32_t(warmup), C.int32_t(iters), &ms)
	})
	return msDuration(ms), err
}

// TimeBarrier times iters barriers; collective.
func (l *Lib) TimeBarrier(warmup, iters int) (time.Duration, error) {
	var ms C.float
	err := l.call("sd_time_barrier", func(e *C.char, c C.size_t) C.int {
		return C.w_time_barrier(l.t, e, c, C.int32_t(warmup), C.int32_t(iters), &ms)
	})
	return msDuration(ms), err
}

// TimeCopy times iters device-to-device copies of bytes; local.
func (l *Lib) TimeCopy(bytes, warmup, iters int) (time.Duration, error) {
	var ms C.float
	err := l.call("sd_time_copy", func(e *C.char, c C.size_t) C.int {
		return C.w_time_copy(l.t, e, c, C.size_t(bytes), C.int32_t(warmup), C.int32_t(iters), &ms)
	})
	return msDuration(ms), err
}

func msDuration(ms C.float) time.Duration {
	return time.Duration(float64(ms) * float64(time.Millisecond))
}

// Buildable reports whether this build can load the library at all: true
// with cgo.
func Buildable() bool { return true }
