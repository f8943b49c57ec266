//go:build cgo

package cudalib

/*
#cgo LDFLAGS: -ldl
#cgo CFLAGS: -I${SRCDIR}/../../cuda
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compute_gen.h"

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

*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
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

// bindTable opens the dlsym table of one header's entry points on l (open,
// the generated *_open) and checks its ABI version (version) against want;
// what names the table in messages ("compute"), prefix the entry points'
// names, by which a missing one is told from another load error.
func bindTable(l *Lib, what, prefix string, want int,
	open func(path, buf *C.char, n C.size_t) unsafe.Pointer, version func(t unsafe.Pointer) int) (unsafe.Pointer, error) {
	cpath := C.CString(l.Path())
	defer C.free(unsafe.Pointer(cpath))
	var buf [1024]byte
	t := open(cpath, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	if t == nil {
		msg := cstr(buf[:])
		if strings.HasPrefix(msg, prefix) {
			return nil, fmt.Errorf("%w: %s lacks the %s entry points %s: rebuild it with cuda/build.sh", ErrUnavailable, l.Path(), what, msg)
		}
		return nil, fmt.Errorf("%w: load %s: %s", ErrUnavailable, l.Path(), msg)
	}
	if v := version(t); v != want {
		C.free(t)
		return nil, fmt.Errorf("%w: %s has %s ABI %d, this program speaks %d: rebuild it with cuda/build.sh",
			ErrUnavailable, l.Path(), what, v, want)
	}
	return t, nil
}

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
	p, err := bindTable(l, "compute", "sd", ComputeABIVersion,
		func(path, buf *C.char, n C.size_t) unsafe.Pointer { return unsafe.Pointer(C.sdcw_open(path, buf, n)) },
		func(t unsafe.Pointer) int { return int(C.cw_sdc_abi_version((*C.sdcw_table)(t))) })
	if err != nil {
		return nil, err
	}
	cp := &Compute{lib: l, t: (*C.sdcw_table)(p)}
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
	if err := c.check("sdc_create", C.cw_sdc_create(cp.t, x, C.uint64_t(stream), C.int32_t(device))); err != nil {
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
	err := c.check("sdc_destroy", C.cw_sdc_destroy(c.cp.t, c.x))
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
	if err := c.check("sdc_device_name", C.cw_sdc_device_name(c.cp.t, c.x, c.x.ctx.device)); err != nil {
		return "", err
	}
	return C.GoString(&c.x.out_str[0][0]), nil
}

// sdcFlag is b as the C ABI's int32 flag, 1 or 0.
func sdcFlag(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// The fills of the structs that entry points take by pointer: the
// generated methods (compute_gen_cgo.go) copy their Go arguments into the
// context's C memory with these before the call.

// setStep copies v into the context's C memory (sdc_step).
func (c *Context) setStep(v StepValues) {
	s := &c.x.in_sdc_step
	s.loss_scale = C.float(v.LossScale)
	s.lr = C.float(v.LR)
	s.step_size = C.float(v.StepSize)
	s.bc2_sqrt = C.float(v.BC2Sqrt)
	s.decay = C.float(v.Decay)
	s.first = sdcFlag(v.First)
}

// setOptim copies o into the context's C memory (sdc_optim).
func (c *Context) setOptim(o OptimArgs) {
	x := &c.x.in_sdc_optim
	x.kind = C.int32_t(o.Kind)
	x.nesterov = sdcFlag(o.Nesterov)
	x.momentum = C.float(o.Momentum)
	x.weight_decay = C.float(o.WeightDecay)
	x.beta1, x.beta2, x.eps = C.float(o.Beta1), C.float(o.Beta2), C.float(o.Eps)
	x.c1, x.c2 = C.float(o.C1), C.float(o.C2)
	x.max_norm = C.float(o.MaxNorm)
	x.halt_on_skip = sdcFlag(o.HaltOnSkip)
}

// setLtArgs copies a into the context's C memory (sdc_lt_args).
func (c *Context) setLtArgs(a LtArgs) {
	x := &c.x.in_sdc_lt_args
	x.epilogue = C.int32_t(a.Epilogue)
	x.trans_a, x.trans_b = sdcFlag(a.TransA), sdcFlag(a.TransB)
	x.m, x.n, x.k = C.int64_t(a.M), C.int64_t(a.N), C.int64_t(a.K)
	x.lda, x.ldb, x.ldc = C.int64_t(a.LDA), C.int64_t(a.LDB), C.int64_t(a.LDC)
	x.bias, x.aux, x.aux_ld = C.uint64_t(a.Bias), C.uint64_t(a.Aux), C.int64_t(a.AuxLD)
	x.align_a, x.align_b, x.align_c = C.int32_t(a.AlignA), C.int32_t(a.AlignB), C.int32_t(a.AlignC)
}

// setGemmDesc copies d into the context's C memory (sdc_bf16_gemm_desc).
func (c *Context) setGemmDesc(d GemmDesc) {
	x := &c.x.in_sdc_bf16_gemm_desc
	x.m, x.n, x.k = C.int32_t(d.M), C.int32_t(d.N), C.int32_t(d.K)
	x.trans_a, x.trans_b = sdcFlag(d.TransA), sdcFlag(d.TransB)
	x.batch = C.int32_t(d.Batch)
	x.stride_a, x.stride_b, x.stride_c = C.int64_t(d.StrideA), C.int64_t(d.StrideB), C.int64_t(d.StrideC)
	x.c_type, x.bias_type = C.int32_t(d.CType), C.int32_t(d.BiasType)
	x.epilogue = C.int32_t(d.Epilogue)
	x.accumulate = sdcFlag(d.Accumulate)
	x.workspace_bytes = C.int64_t(d.WorkspaceBytes)
}
