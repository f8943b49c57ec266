//go:build mpi

package mpi

/*
// Open MPI's headers where Debian and Ubuntu put them (and Fedora, whose
// libmpi.so then needs -L); libmpi.so is on the default library path on
// Debian and Ubuntu. For other layouts add the flags of `mpicc
// --showme:compile` and `mpicc --showme:link` to CGO_CFLAGS and CGO_LDFLAGS
// (docs/MPI.md).
#cgo CFLAGS: -I/usr/lib/x86_64-linux-gnu/openmpi/include -I/usr/lib/aarch64-linux-gnu/openmpi/include
#cgo CFLAGS: -I/usr/lib/powerpc64le-linux-gnu/openmpi/include -I/usr/include/openmpi-x86_64 -I/usr/include/openmpi-aarch64
#cgo LDFLAGS: -lmpi
#include <mpi.h>
#include <limits.h>
#include <stdlib.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

// The C side is thin: every function is one MPI operation (or a short fixed
// sequence of them) that uses MPI's macros, which cgo cannot reach. Counts
// above INT_MAX are split into chunks. Every function returns an MPI error
// code (MPI_SUCCESS is 0).

enum { SD_CHUNK = 1 << 30 };

static MPI_Op sd_op_max = MPI_OP_NULL, sd_op_min = MPI_OP_NULL;

// Go's max and min: a NaN operand wins, and +0 > -0.
static inline float sd_fmax(float x, float y) {
	if (x != x) return x;
	if (y != y) return y;
	if (x == 0 && y == 0) return signbit(x) ? y : x;
	return x > y ? x : y;
}
static inline float sd_fmin(float x, float y) {
	if (x != x) return x;
	if (y != y) return y;
	if (x == 0 && y == 0) return signbit(x) ? x : y;
	return x < y ? x : y;
}
static void sd_max_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
	const float *a = in; float *b = inout;
	for (int i = 0; i < *len; i++) b[i] = sd_fmax(a[i], b[i]);
}
static void sd_min_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
	const float *a = in; float *b = inout;
	for (int i = 0; i < *len; i++) b[i] = sd_fmin(a[i], b[i]);
}

// sd_init initialises MPI for one thread at a time (MPI_THREAD_SERIALIZED).
// MPI may install signal handlers of its own (Open MPI's backtrace on
// SIGSEGV, SIGBUS, ...); the Go runtime needs its handlers, so every handler
// that MPI_Init changed is put back. Errors return to the caller instead of
// aborting.
static int sd_init(int *provided, int *rank, int *size, int *already) {
	static struct sigaction saved[NSIG];
	static int valid[NSIG];
	int flag = 0;
	MPI_Initialized(&flag);
	if (!flag) MPI_Finalized(&flag);
	*already = flag;
	if (flag) return MPI_SUCCESS;
	for (int s = 1; s < NSIG; s++) valid[s] = sigaction(s, NULL, &saved[s]) == 0;
	int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, provided);
	for (int s = 1; s < NSIG; s++) {
		struct sigaction now;
		if (!valid[s] || sigaction(s, NULL, &now) != 0) continue;
		if (now.sa_handler != saved[s].sa_handler || now.sa_flags != saved[s].sa_flags) sigaction(s, &saved[s], NULL);
	}
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, rank)) != MPI_SUCCESS) return rc;
	if ((rc = MPI_Comm_size(MPI_COMM_WORLD, size)) != MPI_SUCCESS) return rc;
	if ((rc = MPI_Op_create(sd_max_fn, 1, &sd_op_max)) != MPI_SUCCESS) return rc;
	return MPI_Op_create(sd_min_fn, 1, &sd_op_min);
}

static int sd_finalize(void) {
	if (sd_op_max != MPI_OP_NULL) MPI_Op_free(&sd_op_max);
	if (sd_op_min != MPI_OP_NULL) MPI_Op_free(&sd_op_min);
	return MPI_Finalize();
}

static void sd_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static void sd_error_string(int rc, char *buf, int cap) {
	int len = 0;
	if (cap < MPI_MAX_ERROR_STRING || MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) len = 0;
	buf[len] = 0;
}

static void sd_library_version(char *buf, int cap) {
	int len = 0;
	if (cap < MPI_MAX_LIBRARY_VERSION_STRING || MPI_Get_library_version(buf, &len) != MPI_SUCCESS) len = 0;
	buf[len] = 0;
}

// sd_win_allocate makes a window of bytes on every PE, zeroes this PE's
// copy and opens the passive-target epoch it lives in.
static int sd_win_allocate(int64_t bytes, void **base, MPI_Win *win) {
	MPI_Info info;
	int rc = MPI_Info_create(&info);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Info_set(info, "same_disp_unit", "true");
	rc = MPI_Win_allocate((MPI_Aint)bytes, 1, info, MPI_COMM_WORLD, base, win);
	MPI_Info_free(&info);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Win_set_errhandler(*win, MPI_ERRORS_RETURN);
	if (bytes > 0) memset(*base, 0, (size_t)bytes);
	return MPI_Win_lock_all(MPI_MODE_NOCHECK, *win);
}

static int sd_win_free(MPI_Win *win) {
	int rc = MPI_Win_unlock_all(*win);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Win_free(win);
}

// sd_put copies bytes from src into pe's window at disp; the source may be
// reused when it returns (MPI_Win_flush_local), so cgo's rule that C keeps
// no Go pointer holds.
static int sd_put(const void *src, int64_t bytes, int pe, int64_t disp, MPI_Win win) {
	const char *p = src;
	while (bytes > 0) {
		int k = bytes > SD_CHUNK ? SD_CHUNK : (int)bytes;
		int rc = MPI_Put(p, k, MPI_BYTE, pe, (MPI_Aint)disp, k, MPI_BYTE, win);
		if (rc != MPI_SUCCESS) return rc;
		p += k; disp += k; bytes -= k;
	}
	return MPI_Win_flush_local(pe, win);
}

// sd_get copies bytes of pe's window at disp into dst and waits for them.
static int sd_get(void *dst, int64_t bytes, int pe, int64_t disp, MPI_Win win) {
	char *p = dst;
	while (bytes > 0) {
		int k = bytes > SD_CHUNK ? SD_CHUNK : (int)bytes;
		int rc = MPI_Get(p, k, MPI_BYTE, pe, (MPI_Aint)disp, k, MPI_BYTE, win);
		if (rc != MPI_SUCCESS) return rc;
		p += k; disp += k; bytes -= k;
	}
	return MPI_Win_flush(pe, win);
}

// sd_signal updates the uint64 at disp of pe's window atomically, replace
// (add == 0) or add, and waits until it is done at the target.
static int sd_signal(uint64_t value, int add, int pe, int64_t disp, MPI_Win win) {
	int rc = MPI_Accumulate(&value, 1, MPI_UINT64_T, pe, (MPI_Aint)disp, 1, MPI_UINT64_T, add ? MPI_SUM : MPI_REPLACE, win);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Win_flush(pe, win);
}

// sd_read_u64 reads the uint64 at disp of pe's window atomically with
// respect to accumulates, and lets MPI make progress.
static int sd_read_u64(uint64_t *out, int pe, int64_t disp, MPI_Win win) {
	uint64_t dummy = 0;
	int flag;
	MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
	int rc = MPI_Fetch_and_op(&dummy, out, MPI_UINT64_T, pe, (MPI_Aint)disp, MPI_NO_OP, win);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Win_flush(pe, win);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Win_sync(win);
}

// sd_publish writes the uint64 value at disp of pe's window (MPI_Put of 8
// aligned bytes) and returns once value's storage may be reused.
static int sd_publish(uint64_t value, int pe, int64_t disp, MPI_Win win) {
	int rc = MPI_Put(&value, 8, MPI_BYTE, pe, (MPI_Aint)disp, 8, MPI_BYTE, win);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Win_flush_local(pe, win);
}

static int sd_flush(int pe, MPI_Win win) { return MPI_Win_flush(pe, win); }
static int sd_flush_all(MPI_Win win) { return MPI_Win_flush_all(win); }
static int sd_win_sync(MPI_Win win) { return MPI_Win_sync(win); }
static int sd_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }

static MPI_Op sd_op(int op) {
	switch (op) {
	case 3: return sd_op_max;
	case 4: return sd_op_min;
	}
	return MPI_SUM;
}

// sd_allreduce_comm reduces n floats at buf in place across the ranks of
// comm; op is comm.Op's number (Sum 1, Max 3, Min 4).
static int sd_allreduce_comm(float *buf, int64_t n, int op, MPI_Comm comm) {
	do {
		int k = n > SD_CHUNK ? SD_CHUNK : (int)n;
		int rc = MPI_Allreduce(MPI_IN_PLACE, buf, k, MPI_FLOAT, sd_op(op), comm);
		if (rc != MPI_SUCCESS) return rc;
		buf += k; n -= k;
	} while (n > 0);
	return MPI_SUCCESS;
}

// sd_allreduce is sd_allreduce_comm across every PE.
static int sd_allreduce(float *buf, int64_t n, int op) { return sd_allreduce_comm(buf, n, op, MPI_COMM_WORLD); }

// sd_reduce reduces n floats at buf into root's buf; the others' are read only.
static int sd_reduce(float *buf, int64_t n, int op, int root, int me) {
	do {
		int k = n > SD_CHUNK ? SD_CHUNK : (int)n;
		int rc = me == root
			? MPI_Reduce(MPI_IN_PLACE, buf, k, MPI_FLOAT, sd_op(op), root, MPI_COMM_WORLD)
			: MPI_Reduce(buf, NULL, k, MPI_FLOAT, sd_op(op), root, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS) return rc;
		buf += k; n -= k;
	} while (n > 0);
	return MPI_SUCCESS;
}

// sd_reduce_scatter reduces the floats at send (the sum of counts) across
// every PE into recv: PE i gets block i, counts[i] floats.
static int sd_reduce_scatter(const float *send, float *recv, const int *counts, int op) {
	return MPI_Reduce_scatter(send, recv, counts, MPI_FLOAT, sd_op(op), MPI_COMM_WORLD);
}
// sd_allgather_bytes gathers in place: PE i's counts[i] bytes at buf +
// displs[i] go into every PE's buf at the same place.
static int sd_allgather_bytes(void *buf, const int *counts, const int *displs) {
	return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
}
static int sd_bcast(void *buf, int64_t bytes, int root) {
	char *p = buf;
	do {
		int k = bytes > SD_CHUNK ? SD_CHUNK : (int)bytes;
		int rc = MPI_Bcast(p, k, MPI_BYTE, root, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS) return rc;
		p += k; bytes -= k;
	} while (bytes > 0);
	return MPI_SUCCESS;
}

// Hierarchical mode (hier.go): a communicator of the ranks of this host (or
// of color's simulated host when color >= 0), one of the ranks with the same
// rank on their host, and the size of the smallest and largest host.
static int sd_hier_split(int color, MPI_Comm *node, MPI_Comm *cross, int *local, int *nlocal, int *minl, int *maxl) {
	int rank, rc;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	rc = color >= 0 ? MPI_Comm_split(MPI_COMM_WORLD, color, rank, node)
	                : MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, node);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm_set_errhandler(*node, MPI_ERRORS_RETURN);
	MPI_Comm_rank(*node, local);
	MPI_Comm_size(*node, nlocal);
	if ((rc = MPI_Comm_split(MPI_COMM_WORLD, *local, rank, cross)) != MPI_SUCCESS) return rc;
	MPI_Comm_set_errhandler(*cross, MPI_ERRORS_RETURN);
	if ((rc = MPI_Allreduce(nlocal, minl, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD)) != MPI_SUCCESS) return rc;
	return MPI_Allreduce(nlocal, maxl, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
}

static int sd_hier_free(MPI_Comm *node, MPI_Comm *cross) {
	int rc = MPI_Comm_free(cross);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_free(node);
}

// sd_win_allocate_hier makes a buffer of hierarchical mode: a shared-memory
// window among the ranks of this host (MPI_Win_allocate_shared), whose local
// segments peers[0..nlocal) this PE can load and store directly, and a window
// over this PE's segment among all ranks (MPI_Win_create) for one-sided
// operations. It zeroes this PE's segment and opens both epochs.
static int sd_win_allocate_hier(int64_t bytes, MPI_Comm node, int nlocal, void **peers, MPI_Win *shared, MPI_Win *world, int *step) {
	MPI_Info info;
	*step = 0;
	int rc = MPI_Info_create(&info);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Info_set(info, "alloc_shared_noncontig", "true");
	void *base = NULL;
	rc = MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, node, &base, shared);
	MPI_Info_free(&info);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Win_set_errhandler(*shared, MPI_ERRORS_RETURN);
	memset(base, 0, (size_t)bytes);
	for (int k = 0; k < nlocal; k++) {
		MPI_Aint size; int disp;
		if ((rc = MPI_Win_shared_query(*shared, k, &size, &disp, &peers[k])) != MPI_SUCCESS) return rc;
	}
	if ((rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, *shared)) != MPI_SUCCESS) return rc;
	*step = 1;
	if ((rc = MPI_Win_create(base, (MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, world)) != MPI_SUCCESS) return rc;
	MPI_Win_set_errhandler(*world, MPI_ERRORS_RETURN);
	return MPI_Win_lock_all(MPI_MODE_NOCHECK, *world);
}

// sd_node_barrier: every store of this host's ranks into the shared window
// before it is visible to all of them after it.
static int sd_node_barrier(MPI_Win shared, MPI_Comm node) {
	int rc = MPI_Win_sync(shared);
	if (rc != MPI_SUCCESS) return rc;
	if ((rc = MPI_Barrier(node)) != MPI_SUCCESS) return rc;
	return MPI_Win_sync(shared);
}

// sd_allgather_u64 gathers k uint64 from every PE into all (k per PE).
static int sd_allgather_u64(const uint64_t *mine, int k, uint64_t *all) {
	return MPI_Allgather(mine, k, MPI_UINT64_T, all, k, MPI_UINT64_T, MPI_COMM_WORLD);
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// mpiError is a failed MPI call: its name and MPI's message.
type mpiError struct {
	call string
	code int
	msg  string
}

func (e *mpiError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("%s failed with MPI error %d", e.call, e.code)
	}
	return fmt.Sprintf("%s: %s (MPI error %d)", e.call, e.msg, e.code)
}

// check turns an MPI return code into an error (nil for MPI_SUCCESS).
func check(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	var buf [C.MPI_MAX_ERROR_STRING + 1]C.char
	C.sd_error_string(rc, &buf[0], C.int(len(buf)))
	return &mpiError{call: call, code: int(rc), msg: strings.TrimSpace(C.GoString(&buf[0]))}
}

// libraryVersion is the first line of MPI_Get_library_version.
func libraryVersion() string {
	var buf [C.MPI_MAX_LIBRARY_VERSION_STRING + 1]C.char
	C.sd_library_version(&buf[0], C.int(len(buf)))
	v, _, _ := strings.Cut(C.GoString(&buf[0]), "\n")
	return strings.TrimRight(strings.TrimSpace(v), ",")
}

// comms are the communicators of hierarchical mode.
type comms struct {
	node, cross C.MPI_Comm
}

func cHierSplit(color int) (cm comms, local, nlocal, minLocal, maxLocal int, err error) {
	var l, nl, mn, mx C.int
	err = check("MPI_Comm_split", C.sd_hier_split(C.int(color), &cm.node, &cm.cross, &l, &nl, &mn, &mx))
	return cm, int(l), int(nl), int(mn), int(mx), err
}

func cHierFree(cm *comms) error { return check("MPI_Comm_free", C.sd_hier_free(&cm.node, &cm.cross)) }

// cWinAllocateHier makes the two windows of a hierarchical-mode buffer and
// returns the addresses of the segments of this host's ranks; the windows'
// base is this PE's segment, peers[local].
func cWinAllocateHier(bytes int64, cm comms, local, nlocal int) (shared, world window, peers []unsafe.Pointer, err error) {
	mem := C.calloc(C.size_t(nlocal), C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(mem)
	ptrs := unsafe.Slice((*unsafe.Pointer)(mem), nlocal)
	var step C.int
	rc := C.sd_win_allocate_hier(C.int64_t(bytes), cm.node, C.int(nlocal), &ptrs[0], &shared.win, &world.win, &step)
	if step == 0 {
		err = check("MPI_Win_allocate_shared", rc)
	} else if err = check("MPI_Win_create", rc); err != nil {
		err = fmt.Errorf("%w; hierarchical mode makes a window over the shared memory for one-sided operations, which Open MPI serves with osc rdma (an RDMA-capable transport) or osc pt2pt: add --mca osc ^ucx to mpirun (Debian's and Ubuntu's openmpi-mca-params.conf disable osc pt2pt)", err)
	}
	if err != nil {
		return shared, world, nil, err
	}
	peers = append([]unsafe.Pointer(nil), ptrs...)
	shared.base, world.base = peers[local], peers[local]
	return shared, world, peers, nil
}

func cNodeBarrier(shared window, cm comms) error {
	return check("MPI_Barrier", C.sd_node_barrier(shared.win, cm.node))
}

func cAllReduceCross(buf unsafe.Pointer, n int64, op int, cm comms) error {
	return check("MPI_Allreduce", C.sd_allreduce_comm((*C.float)(buf), C.int64_t(n), C.int(op), cm.cross))
}

// window is one MPI window and the address of this PE's copy.
type window struct {
	win  C.MPI_Win
	base unsafe.Pointer
}

// Thin wrappers, one per C function. The caller holds Comm.mu.

func cInit() (rank, size int, already bool, err error) {
	var provided, r, s, a C.int
	rc := C.sd_init(&provided, &r, &s, &a)
	if a != 0 {
		return 0, 0, true, nil
	}
	if err := check("MPI_Init_thread", rc); err != nil {
		return 0, 0, false, err
	}
	if provided < C.MPI_THREAD_SERIALIZED {
		return 0, 0, false, fmt.Errorf("MPI_Init_thread: the library provides thread level %d, below MPI_THREAD_SERIALIZED", int(provided))
	}
	return int(r), int(s), false, nil
}

func cFinalize() error { return check("MPI_Finalize", C.sd_finalize()) }

func cAbort(code int) { C.sd_abort(C.int(code)) }

func cWinAllocate(bytes int64) (window, error) {
	var w window
	rc := C.sd_win_allocate(C.int64_t(bytes), &w.base, &w.win)
	return w, check("MPI_Win_allocate", rc)
}

func cWinFree(w *window) error {
	err := check("MPI_Win_free", C.sd_win_free(&w.win))
	w.base = nil
	return err
}

func cPut(src unsafe.Pointer, bytes int64, pe int, disp int64, w window) error {
	return check("MPI_Put", C.sd_put(src, C.int64_t(bytes), C.int(pe), C.int64_t(disp), w.win))
}

func cGet(dst unsafe.Pointer, bytes int64, pe int, disp int64, w window) error {
	return check("MPI_Get", C.sd_get(dst, C.int64_t(bytes), C.int(pe), C.int64_t(disp), w.win))
}

func cSignal(value uint64, add bool, pe int, disp int64, w window) error {
	a := C.int(0)
	if add {
		a = 1
	}
	return check("MPI_Accumulate", C.sd_signal(C.uint64_t(value), a, C.int(pe), C.int64_t(disp), w.win))
}

func cReadU64(pe int, disp int64, w window) (uint64, error) {
	var v C.uint64_t
	err := check("MPI_Fetch_and_op", C.sd_read_u64(&v, C.int(pe), C.int64_t(disp), w.win))
	return uint64(v), err
}

func cPublish(value uint64, pe int, disp int64, w window) error {
	return check("MPI_Put", C.sd_publish(C.uint64_t(value), C.int(pe), C.int64_t(disp), w.win))
}

func cFlush(pe int, w window) error { return check("MPI_Win_flush", C.sd_flush(C.int(pe), w.win)) }

func cFlushAll(w window) error { return check("MPI_Win_flush_all", C.sd_flush_all(w.win)) }

func cWinSync(w window) error { return check("MPI_Win_sync", C.sd_win_sync(w.win)) }

func cBarrier() error { return check("MPI_Barrier", C.sd_barrier()) }

func cAllReduce(buf unsafe.Pointer, n int64, op int) error {
	return check("MPI_Allreduce", C.sd_allreduce((*C.float)(buf), C.int64_t(n), C.int(op)))
}

func cReduce(buf unsafe.Pointer, n int64, op, root, me int) error {
	return check("MPI_Reduce", C.sd_reduce((*C.float)(buf), C.int64_t(n), C.int(op), C.int(root), C.int(me)))
}

func cReduceScatter(send, recv unsafe.Pointer, counts []int32, op int) error {
	return check("MPI_Reduce_scatter", C.sd_reduce_scatter((*C.float)(send), (*C.float)(recv), (*C.int)(unsafe.Pointer(&counts[0])), C.int(op)))
}
func cAllgatherBytes(buf unsafe.Pointer, counts, displs []int32) error {
	return check("MPI_Allgatherv", C.sd_allgather_bytes(buf, (*C.int)(unsafe.Pointer(&counts[0])), (*C.int)(unsafe.Pointer(&displs[0]))))
}
func cBcast(buf unsafe.Pointer, bytes int64, root int) error {
	return check("MPI_Bcast", C.sd_bcast(buf, C.int64_t(bytes), C.int(root)))
}

func cAllgatherU64(mine, all []uint64) error {
	return check("MPI_Allgather", C.sd_allgather_u64((*C.uint64_t)(unsafe.Pointer(&mine[0])), C.int(len(mine)),
		(*C.uint64_t)(unsafe.Pointer(&all[0]))))
}
