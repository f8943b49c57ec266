//go:build cgo

package cudalib

/*
#cgo LDFLAGS: -ldl
#cgo CFLAGS: -I${SRCDIR}/../../cuda
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "symddp_compute.h"

// The compute entry points, in the order of sdcw_names.
enum {
	SDCI_sdc_abi_version, SDCI_sdc_create, SDCI_sdc_destroy, SDCI_sdc_device_name,
	SDCI_sdc_dev_alloc, SDCI_sdc_dev_free, SDCI_sdc_host_alloc, SDCI_sdc_host_free,
	SDCI_sdc_zero, SDCI_sdc_copy, SDCI_sdc_htod, SDCI_sdc_dtoh,
	SDCI_sdc_event_create, SDCI_sdc_event_destroy, SDCI_sdc_event_record, SDCI_sdc_wait_event,
	SDCI_sdc_event_sync, SDCI_sdc_sync, SDCI_sdc_gemm, SDCI_sdc_bias_act,
	SDCI_sdc_bias_act_backward, SDCI_sdc_softmax_xent, SDCI_sdc_accumulate, SDCI_sdc_scale,
	SDCI_sdc_sum_squares, SDCI_sdc_update, SDCI_sdc_reset_status, SDCI_sdc_set_step,
	SDCI_sdc_capture_begin, SDCI_sdc_capture_end, SDCI_sdc_capturing, SDCI_sdc_graph_launch,
	SDCI_sdc_graph_destroy, SDCI_sdc_lt_plan_create, SDCI_sdc_lt_plan_destroy, SDCI_sdc_lt_matmul,
	SDCI_sdc_side_fork, SDCI_sdc_side_join,
	SDCI_count
};

static const char *const sdcw_names[SDCI_count] = {
	"sdc_abi_version", "sdc_create", "sdc_destroy", "sdc_device_name",
	"sdc_dev_alloc", "sdc_dev_free", "sdc_host_alloc", "sdc_host_free",
	"sdc_zero", "sdc_copy", "sdc_htod", "sdc_dtoh",
	"sdc_event_create", "sdc_event_destroy", "sdc_event_record", "sdc_wait_event",
	"sdc_event_sync", "sdc_sync", "sdc_gemm", "sdc_bias_act",
	"sdc_bias_act_backward", "sdc_softmax_xent", "sdc_accumulate", "sdc_scale",
	"sdc_sum_squares", "sdc_update", "sdc_reset_status", "sdc_set_step",
	"sdc_capture_begin", "sdc_capture_end", "sdc_capturing", "sdc_graph_launch",
	"sdc_graph_destroy", "sdc_lt_plan_create", "sdc_lt_plan_destroy", "sdc_lt_matmul",
	"sdc_side_fork", "sdc_side_join",
};

// Defined in lib_cgo.go's preamble.
void *sdw_dlopen(const char *path, char *err, size_t cap);
size_t sdw_bind(void *h, const char *const *names, int n, void **fn, char *err, size_t cap);

typedef const char *(*sdcw_msg_fn)(void);

typedef struct {
	void *fn[SDCI_count];
	sdcw_msg_fn last_error;
} sdcw_table;

// sdcw_open binds the compute entry points of the library at path, which
// the loader has already loaded (dlopen returns the same handle). The
// message of a failure is sd_last_error's; a stand-in library may export
// sdc_last_error instead.
static sdcw_table *sdcw_open(const char *path, char *err, size_t cap) {
	void *h = sdw_dlopen(path, err, cap);
	if (!h) return NULL;
	sdcw_table *t = (sdcw_table *)calloc(1, sizeof *t);
	if (!t) {
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	size_t used = sdw_bind(h, sdcw_names, SDCI_count, t->fn, err, cap);
	t->last_error = (sdcw_msg_fn)dlsym(h, "sdc_last_error");
	if (!t->last_error) t->last_error = (sdcw_msg_fn)dlsym(h, "sd_last_error");
	if (!t->last_error && used < cap) snprintf(err + used, cap - used, "%ssd_last_error", used ? " " : "");
	if (used || !t->last_error) {
		free(t);
		return NULL;
	}
	return t;
}

// The C memory of one context: the context itself, the structs passed by
// pointer, the out-parameters and the error message, so that no call needs
// Go memory (and nothing escapes to the Go heap).
typedef struct {
	sdc_ctx ctx;
	sdc_step step;
	sdc_optim optim;
	sdc_lt_args lt;
	uint64_t u64;
	double f64;
	int32_t i32;
	void *ptr;
	char name[128];
	char err[1024];
} sdcw_ctx;

#define SDCF(name, t) ((__typeof__(&name))((t)->fn[SDCI_##name]))

// sdcw_ret keeps the library's message of a failure, read on the thread
// that saw it (the message is thread-local in the library).
static int sdcw_ret(const sdcw_table *t, sdcw_ctx *x, int rc) {
	if (rc != 0) {
		const char *m = t->last_error();
		snprintf(x->err, sizeof x->err, "%s", m ? m : "");
	}
	return rc;
}

#define W const sdcw_table *t, sdcw_ctx *x
#define R(expr) return sdcw_ret(t, x, (expr))

static int cw_abi_version(const sdcw_table *t) { return SDCF(sdc_abi_version, t)(); }
static int cw_create(W, uint64_t stream, int32_t dev) { R(SDCF(sdc_create, t)(stream, dev, &x->ctx)); }
static int cw_destroy(W) { R(SDCF(sdc_destroy, t)(&x->ctx)); }
static int cw_device_name(W, int32_t dev) { R(SDCF(sdc_device_name, t)(dev, x->name, sizeof x->name)); }
static int cw_dev_alloc(W, size_t n) { R(SDCF(sdc_dev_alloc, t)(n, &x->u64)); }
static int cw_dev_free(W, uint64_t p) { R(SDCF(sdc_dev_free, t)(p)); }
static int cw_host_alloc(W, size_t n) { R(SDCF(sdc_host_alloc, t)(n, &x->ptr)); }
static int cw_host_free(W, void *p) { R(SDCF(sdc_host_free, t)(p)); }
static int cw_zero(W, uint64_t dst, size_t n) { R(SDCF(sdc_zero, t)(&x->ctx, dst, n)); }
static int cw_copy(W, uint64_t dst, uint64_t src, size_t n) { R(SDCF(sdc_copy, t)(&x->ctx, dst, src, n)); }
static int cw_htod(W, int32_t on_copy, uint64_t dst, const void *src, size_t n) {
	R(SDCF(sdc_htod, t)(&x->ctx, on_copy, dst, src, n));
}
static int cw_dtoh(W, int32_t on_copy, void *dst, uint64_t src, size_t n) {
	R(SDCF(sdc_dtoh, t)(&x->ctx, on_copy, dst, src, n));
}
static int cw_event_create(W) { R(SDCF(sdc_event_create, t)(&x->u64)); }
static int cw_event_destroy(W, uint64_t ev) { R(SDCF(sdc_event_destroy, t)(ev)); }
static int cw_event_record(W, int32_t on_copy, uint64_t ev) { R(SDCF(sdc_event_record, t)(&x->ctx, on_copy, ev)); }
static int cw_wait_event(W, int32_t on_copy, uint64_t ev) { R(SDCF(sdc_wait_event, t)(&x->ctx, on_copy, ev)); }
static int cw_event_sync(W, uint64_t ev, int64_t ns) { R(SDCF(sdc_event_sync, t)(ev, ns)); }
static int cw_sync(W, int64_t ns) { R(SDCF(sdc_sync, t)(&x->ctx, ns)); }
static int cw_gemm(W, int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, float alpha, uint64_t a,
                   int64_t lda, uint64_t b, int64_t ldb, float beta, uint64_t c, int64_t ldc) {
	R(SDCF(sdc_gemm, t)(&x->ctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
}
static int cw_bias_act(W, uint64_t y, int64_t rows, int64_t cols, uint64_t bias, int32_t act) {
	R(SDCF(sdc_bias_act, t)(&x->ctx, y, rows, cols, bias, act));
}
static int cw_bias_act_backward(W, uint64_t dy, uint64_t y, int64_t rows, int64_t cols, uint64_t dbias,
                                int32_t act, int32_t acc) {
	R(SDCF(sdc_bias_act_backward, t)(&x->ctx, dy, y, rows, cols, dbias, act, acc));
}
static int cw_softmax_xent(W, uint64_t logits, uint64_t labels, int64_t rows, int64_t classes,
                           uint64_t dlogits, float scale, int32_t use_block, uint64_t stats) {
	R(SDCF(sdc_softmax_xent, t)(&x->ctx, logits, labels, rows, classes, dlogits, scale, use_block, stats));
}
static int cw_accumulate(W, uint64_t dst, uint64_t src, int64_t n) { R(SDCF(sdc_accumulate, t)(&x->ctx, dst, src, n)); }
static int cw_scale(W, uint64_t p, float s, int64_t n) { R(SDCF(sdc_scale, t)(&x->ctx, p, s, n)); }
static int cw_sum_squares(W, uint64_t p, int64_t n, int64_t ns) {
	R(SDCF(sdc_sum_squares, t)(&x->ctx, p, n, ns, &x->f64));
}
static int cw_update(W, int32_t use_block, uint64_t p, uint64_t g, uint64_t s0, uint64_t s1, int64_t n) {
	R(SDCF(sdc_update, t)(&x->ctx, &x->optim, &x->step, use_block, p, g, s0, s1, n));
}
static int cw_reset_status(W) { R(SDCF(sdc_reset_status, t)(&x->ctx)); }
static int cw_set_step(W) { R(SDCF(sdc_set_step, t)(&x->ctx, &x->step)); }
static int cw_capture_begin(W) { R(SDCF(sdc_capture_begin, t)(&x->ctx)); }
static int cw_capture_end(W) { R(SDCF(sdc_capture_end, t)(&x->ctx, &x->u64)); }
static int cw_capturing(W) { R(SDCF(sdc_capturing, t)(&x->ctx, &x->i32)); }
static int cw_graph_launch(W, uint64_t exec) { R(SDCF(sdc_graph_launch, t)(&x->ctx, exec, &x->step)); }
static int cw_graph_destroy(W, uint64_t exec) { R(SDCF(sdc_graph_destroy, t)(exec)); }
static int cw_lt_plan_create(W) { R(SDCF(sdc_lt_plan_create, t)(&x->ctx, &x->lt, &x->u64)); }
static int cw_lt_plan_destroy(W, uint64_t plan) { R(SDCF(sdc_lt_plan_destroy, t)(plan)); }
static int cw_lt_matmul(W, uint64_t plan, uint64_t a, uint64_t b, uint64_t c, int32_t side) {
	R(SDCF(sdc_lt_matmul, t)(&x->ctx, plan, a, b, c, side));
}
static int cw_side_fork(W) { R(SDCF(sdc_side_fork, t)(&x->ctx)); }
static int cw_side_join(W) { R(SDCF(sdc_side_join, t)(&x->ctx)); }
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Compute is the compute half of the loaded library: the sdc_* entry points
// of cuda/symddp_compute.h, bound with dlsym on top of a Lib.
type Compute struct {
	lib *Lib
	t   *C.sdcw_table
}

var (
	computeMu     sync.Mutex
	computeLoaded = map[*Lib]*Compute{}
)

// OpenCompute binds the compute entry points of l (once per Lib) and checks
// their ABI version.
func OpenCompute(l *Lib) (*Compute, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: no library", ErrUnavailable)
	}
	computeMu.Lock()
	defer computeMu.Unlock()
	if cp, ok := computeLoaded[l]; ok {
		return cp, nil
	}
	cpath := C.CString(l.Path())
	defer C.free(unsafe.Pointer(cpath))
	var buf [1024]byte
	t := C.sdcw_open(cpath, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	if t == nil {
		msg := cstr(buf[:])
		if strings.HasPrefix(msg, "sd") {
			return nil, fmt.Errorf("%w: %s lacks the compute entry points %s: rebuild it with cuda/build.sh", ErrUnavailable, l.Path(), msg)
		}
		return nil, fmt.Errorf("%w: load %s: %s", ErrUnavailable, l.Path(), msg)
	}
	if v := int(C.cw_abi_version(t)); v != ComputeABIVersion {
		C.free(unsafe.Pointer(t))
		return nil, fmt.Errorf("%w: %s has compute ABI %d, this program speaks %d: rebuild it with cuda/build.sh",
			ErrUnavailable, l.Path(), v, ComputeABIVersion)
	}
	cp := &Compute{lib: l, t: t}
	computeLoaded[l] = cp
	return cp, nil
}

// Lib is the library the entry points belong to.
func (cp *Compute) Lib() *Lib { return cp.lib }

// Context is a compute context (sdc_ctx) with its C memory. It is used by
// one goroutine at a time; no method allocates Go memory unless it fails.
type Context struct {
	cp     *Compute
	x      *C.sdcw_ctx
	closed bool
}

// NewContext makes a compute context: on stream (a cudaStream_t of the
// current device, e.g. the comm backend's Stream) or, when stream is 0, on
// a stream of its own on device.
func (cp *Compute) NewContext(stream uintptr, device int) (*Context, error) {
	x := (*C.sdcw_ctx)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sdcw_ctx{}))))
	if x == nil {
		return nil, fmt.Errorf("%w: calloc of a compute context", ErrNoMemory)
	}
	c := &Context{cp: cp, x: x}
	if err := c.check("sdc_create", C.cw_create(cp.t, x, C.uint64_t(stream), C.int32_t(device))); err != nil {
		C.free(unsafe.Pointer(x))
		return nil, err
	}
	return c, nil
}

// check turns a status into an error carrying the library's message.
func (c *Context) check(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return callError(call, int(rc), C.GoString(&c.x.err[0]))
}

// Close waits for the context's streams and releases it.
func (c *Context) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	err := c.check("sdc_destroy", C.cw_destroy(c.cp.t, c.x))
	C.free(unsafe.Pointer(c.x))
	c.x = nil
	return err
}

// Info describes the context.
func (c *Context) Info() ContextInfo {
	x := &c.x.ctx
	return ContextInfo{
		Stream:     uintptr(x.stream),
		CopyStream: uintptr(x.copy_stream),
		Status:     uintptr(x.status),
		Device:     int(x.device),
		SMCount:    int(x.sm_count),
		OwnsStream: x.owns_stream != 0,
	}
}

// DeviceName is the name of the context's GPU.
func (c *Context) DeviceName() (string, error) {
	if err := c.check("sdc_device_name", C.cw_device_name(c.cp.t, c.x, c.x.ctx.device)); err != nil {
		return "", err
	}
	return C.GoString(&c.x.name[0]), nil
}

// sdcFlag is b as the C ABI's int32 flag, 1 or 0.
func sdcFlag(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// DevAlloc allocates device memory (cudaMalloc).
func (c *Context) DevAlloc(bytes int) (uintptr, error) {
	err := c.check("sdc_dev_alloc", C.cw_dev_alloc(c.cp.t, c.x, C.size_t(bytes)))
	return uintptr(c.x.u64), err
}

// DevFree frees memory from DevAlloc.
func (c *Context) DevFree(p uintptr) error {
	return c.check("sdc_dev_free", C.cw_dev_free(c.cp.t, c.x, C.uint64_t(p)))
}

// HostAlloc allocates pinned host memory.
func (c *Context) HostAlloc(bytes int) (unsafe.Pointer, error) {
	err := c.check("sdc_host_alloc", C.cw_host_alloc(c.cp.t, c.x, C.size_t(bytes)))
	return c.x.ptr, err
}

// HostFree frees memory from HostAlloc.
func (c *Context) HostFree(p unsafe.Pointer) error {
	return c.check("sdc_host_free", C.cw_host_free(c.cp.t, c.x, p))
}

// Zero enqueues a memset to 0 of bytes at dst.
func (c *Context) Zero(dst uintptr, bytes int) error {
	return c.check("sdc_zero", C.cw_zero(c.cp.t, c.x, C.uint64_t(dst), C.size_t(bytes)))
}

// Copy enqueues a device-to-device copy.
func (c *Context) Copy(dst, src uintptr, bytes int) error {
	return c.check("sdc_copy", C.cw_copy(c.cp.t, c.x, C.uint64_t(dst), C.uint64_t(src), C.size_t(bytes)))
}

// HtoD enqueues a copy from host memory src (pinned, from HostAlloc) to
// device address dst, on the copy stream when onCopyStream.
func (c *Context) HtoD(onCopyStream bool, dst uintptr, src unsafe.Pointer, bytes int) error {
	return c.check("sdc_htod", C.cw_htod(c.cp.t, c.x, sdcFlag(onCopyStream), C.uint64_t(dst), src, C.size_t(bytes)))
}

// DtoH enqueues a copy from device address src to host memory dst (pinned).
func (c *Context) DtoH(onCopyStream bool, dst unsafe.Pointer, src uintptr, bytes int) error {
	return c.check("sdc_dtoh", C.cw_dtoh(c.cp.t, c.x, sdcFlag(onCopyStream), dst, C.uint64_t(src), C.size_t(bytes)))
}

// EventCreate makes a CUDA event.
func (c *Context) EventCreate() (uint64, error) {
	err := c.check("sdc_event_create", C.cw_event_create(c.cp.t, c.x))
	return uint64(c.x.u64), err
}

// EventDestroy releases an event.
func (c *Context) EventDestroy(ev uint64) error {
	return c.check("sdc_event_destroy", C.cw_event_destroy(c.cp.t, c.x, C.uint64_t(ev)))
}

// EventRecord records ev on the stream (or the copy stream).
func (c *Context) EventRecord(onCopyStream bool, ev uint64) error {
	return c.check("sdc_event_record", C.cw_event_record(c.cp.t, c.x, sdcFlag(onCopyStream), C.uint64_t(ev)))
}

// WaitEvent makes the stream (or the copy stream) wait for ev.
func (c *Context) WaitEvent(onCopyStream bool, ev uint64) error {
	return c.check("sdc_wait_event", C.cw_wait_event(c.cp.t, c.x, sdcFlag(onCopyStream), C.uint64_t(ev)))
}

// EventSync waits on the host for ev, with the comm runtime's deadline and
// failure report when the runtime is up.
func (c *Context) EventSync(ev uint64, timeout time.Duration) error {
	return c.check("sdc_event_sync", C.cw_event_sync(c.cp.t, c.x, C.uint64_t(ev), C.int64_t(timeout.Nanoseconds())))
}

// Sync waits on the host for the stream's work.
func (c *Context) Sync(timeout time.Duration) error {
	return c.check("sdc_sync", C.cw_sync(c.cp.t, c.x, C.int64_t(timeout.Nanoseconds())))
}

// Gemm enqueues row-major c (m,n) = alpha op(a) (m,k) op(b) (k,n) + beta c;
// lda, ldb, ldc are the stored row lengths.
func (c *Context) Gemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, cm uintptr, ldc int) error {
	return c.check("sdc_gemm", C.cw_gemm(c.cp.t, c.x, sdcFlag(transA), sdcFlag(transB), C.int64_t(m), C.int64_t(n), C.int64_t(k),
		C.float(alpha), C.uint64_t(a), C.int64_t(lda), C.uint64_t(b), C.int64_t(ldb), C.float(beta), C.uint64_t(cm), C.int64_t(ldc)))
}

// BiasAct enqueues y (rows,cols) = act(y + bias) in place; bias may be 0.
func (c *Context) BiasAct(y uintptr, rows, cols int, bias uintptr, act Activation) error {
	return c.check("sdc_bias_act", C.cw_bias_act(c.cp.t, c.x, C.uint64_t(y), C.int64_t(rows), C.int64_t(cols), C.uint64_t(bias), C.int32_t(act)))
}

// BiasActBackward enqueues dy *= act'(y) and dbias (= or +=) column sums of dy.
func (c *Context) BiasActBackward(dy, y uintptr, rows, cols int, dbias uintptr, act Activation, accumulate bool) error {
	return c.check("sdc_bias_act_backward", C.cw_bias_act_backward(c.cp.t, c.x, C.uint64_t(dy), C.uint64_t(y),
		C.int64_t(rows), C.int64_t(cols), C.uint64_t(dbias), C.int32_t(act), sdcFlag(accumulate)))
}

// SoftmaxXent enqueues softmax cross-entropy; scale comes from the step
// block when useBlock.
func (c *Context) SoftmaxXent(logits, labels uintptr, rows, classes int, dlogits uintptr, scale float32, useBlock bool, stats uintptr) error {
	return c.check("sdc_softmax_xent", C.cw_softmax_xent(c.cp.t, c.x, C.uint64_t(logits), C.uint64_t(labels),
		C.int64_t(rows), C.int64_t(classes), C.uint64_t(dlogits), C.float(scale), sdcFlag(useBlock), C.uint64_t(stats)))
}

// Accumulate enqueues dst (n) += src (n).
func (c *Context) Accumulate(dst, src uintptr, n int) error {
	return c.check("sdc_accumulate", C.cw_accumulate(c.cp.t, c.x, C.uint64_t(dst), C.uint64_t(src), C.int64_t(n)))
}

// Scale enqueues x (n) *= s.
func (c *Context) Scale(x uintptr, s float32, n int) error {
	return c.check("sdc_scale", C.cw_scale(c.cp.t, c.x, C.uint64_t(x), C.float(s), C.int64_t(n)))
}

// SumSquares returns the sum of squares of x (n) in double; it waits.
func (c *Context) SumSquares(x uintptr, n int, timeout time.Duration) (float64, error) {
	err := c.check("sdc_sum_squares", C.cw_sum_squares(c.cp.t, c.x, C.uint64_t(x), C.int64_t(n), C.int64_t(timeout.Nanoseconds())))
	return float64(c.x.f64), err
}

// setStep copies v into the context's C memory.
func (c *Context) setStep(v StepValues) {
	s := &c.x.step
	s.loss_scale = C.float(v.LossScale)
	s.lr = C.float(v.LR)
	s.step_size = C.float(v.StepSize)
	s.bc2_sqrt = C.float(v.BC2Sqrt)
	s.decay = C.float(v.Decay)
	s.first = sdcFlag(v.First)
}

// Update enqueues one optimizer step over an arena of n elements (state1
// only for Adam and AdamW, state0 0 for SGD without momentum); per-step
// values from v, or from the step block when useBlock.
func (c *Context) Update(o OptimArgs, v StepValues, useBlock bool, params, grads, state0, state1 uintptr, n int) error {
	x := &c.x.optim
	x.kind = C.int32_t(o.Kind)
	x.nesterov = sdcFlag(o.Nesterov)
	x.momentum = C.float(o.Momentum)
	x.weight_decay = C.float(o.WeightDecay)
	x.beta1, x.beta2, x.eps = C.float(o.Beta1), C.float(o.Beta2), C.float(o.Eps)
	x.c1, x.c2 = C.float(o.C1), C.float(o.C2)
	x.max_norm = C.float(o.MaxNorm)
	x.halt_on_skip = sdcFlag(o.HaltOnSkip)
	c.setStep(v)
	return c.check("sdc_update", C.cw_update(c.cp.t, c.x, sdcFlag(useBlock), C.uint64_t(params), C.uint64_t(grads),
		C.uint64_t(state0), C.uint64_t(state1), C.int64_t(n)))
}

// ResetStatus zeroes the update status (clears a halt).
func (c *Context) ResetStatus() error {
	return c.check("sdc_reset_status", C.cw_reset_status(c.cp.t, c.x))
}

// SetStep enqueues the write of v into the step block.
func (c *Context) SetStep(v StepValues) error {
	c.setStep(v)
	return c.check("sdc_set_step", C.cw_set_step(c.cp.t, c.x))
}

// CaptureBegin starts capturing the stream into a CUDA graph (thread-local
// mode: end it from the same OS thread).
func (c *Context) CaptureBegin() error {
	return c.check("sdc_capture_begin", C.cw_capture_begin(c.cp.t, c.x))
}

// CaptureEnd ends the capture and returns the instantiated graph.
func (c *Context) CaptureEnd() (uint64, error) {
	err := c.check("sdc_capture_end", C.cw_capture_end(c.cp.t, c.x))
	return uint64(c.x.u64), err
}

// Capturing reports whether the stream is capturing.
func (c *Context) Capturing() (bool, error) {
	err := c.check("sdc_capturing", C.cw_capturing(c.cp.t, c.x))
	return c.x.i32 != 0, err
}

// GraphLaunch enqueues the graph, whose kernels that read the step block
// take v's values as arguments for this launch.
func (c *Context) GraphLaunch(exec uint64, v StepValues) error {
	c.setStep(v)
	return c.check("sdc_graph_launch", C.cw_graph_launch(c.cp.t, c.x, C.uint64_t(exec)))
}

// GraphDestroy releases a graph from CaptureEnd.
func (c *Context) GraphDestroy(exec uint64) error {
	return c.check("sdc_graph_destroy", C.cw_graph_destroy(c.cp.t, c.x, C.uint64_t(exec)))
}

// LtPlan plans a GEMM with a fused epilogue on cuBLASLt (sdc_lt_plan_create)
// and returns its handle; it fails when cuBLASLt has no algorithm for it.
func (c *Context) LtPlan(a LtArgs) (uint64, error) {
	x := &c.x.lt
	x.epilogue = C.int32_t(a.Epilogue)
	x.trans_a, x.trans_b = sdcFlag(a.TransA), sdcFlag(a.TransB)
	x.m, x.n, x.k = C.int64_t(a.M), C.int64_t(a.N), C.int64_t(a.K)
	x.lda, x.ldb, x.ldc = C.int64_t(a.LDA), C.int64_t(a.LDB), C.int64_t(a.LDC)
	x.bias, x.aux, x.aux_ld = C.uint64_t(a.Bias), C.uint64_t(a.Aux), C.int64_t(a.AuxLD)
	x.align_a, x.align_b, x.align_c = C.int32_t(a.AlignA), C.int32_t(a.AlignB), C.int32_t(a.AlignC)
	err := c.check("sdc_lt_plan_create", C.cw_lt_plan_create(c.cp.t, c.x))
	return uint64(c.x.u64), err
}

// LtPlanDestroy releases a plan from LtPlan.
func (c *Context) LtPlanDestroy(plan uint64) error {
	return c.check("sdc_lt_plan_destroy", C.cw_lt_plan_destroy(c.cp.t, c.x, C.uint64_t(plan)))
}

// LtMatmul enqueues the planned GEMM with operands a, b and output cm.
func (c *Context) LtMatmul(plan uint64, a, b, cm uintptr, side bool) error {
	return c.check("sdc_lt_matmul", C.cw_lt_matmul(c.cp.t, c.x, C.uint64_t(plan), C.uint64_t(a), C.uint64_t(b), C.uint64_t(cm), sdcFlag(side)))
}

// SideFork orders the side stream after the work enqueued so far
// (sdc_side_fork); SideJoin orders the stream after the side stream's.
func (c *Context) SideFork() error { return c.check("sdc_side_fork", C.cw_side_fork(c.cp.t, c.x)) }

// SideJoin: see SideFork.
func (c *Context) SideJoin() error { return c.check("sdc_side_join", C.cw_side_join(c.cp.t, c.x)) }
