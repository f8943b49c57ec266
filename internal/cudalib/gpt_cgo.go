//go:build cgo

package cudalib

/*
#cgo LDFLAGS: -ldl
#cgo CFLAGS: -I${SRCDIR}/../../cuda
#include <stdio.h>
#include <stdlib.h>
#include "gpt_gen.h"

// sdgw_open binds the GPT entry points of the library at path, which the
// loader has already loaded (dlopen returns the same handle).
static sdgw_table *sdgw_open(const char *path, char *err, size_t cap) {
	void *h = sdw_dlopen(path, err, cap);
	if (!h) return NULL;
	sdgw_table *t = (sdgw_table *)calloc(1, sizeof *t);
	if (!t) {
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	if (sdw_bind(h, sdgw_names, SDGI_count, t->fn, err, cap)) {
		free(t);
		return NULL;
	}
	return t;
}

*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// GPT is the GPT-2 kernels of the loaded library: the sdg_* entry points of
// cuda/symddp_gpt.h, bound with dlsym on top of a Lib. Every method is one
// launcher (generated, gpt_gen_cgo.go): device tensors, streams, cuBLASLt
// handles and plans are uintptrs, shapes ints, and a failed launch returns a
// *GPTError carrying sdg_last_error()'s message. Its methods may be called
// from any goroutine (a plan from one at a time); no successful call
// allocates Go memory.
type GPT struct {
	lib *Lib
	t   *C.sdgw_table
	// calls holds the C memory of calls (error message, host structs, plan
	// outputs), so that a call passes no Go memory to C.
	calls chan *C.sdgw_call
}

// gptCallCount is how many calls may be in flight at once before a call
// allocates C memory of its own.
const gptCallCount = 8

var (
	gptMu     sync.Mutex
	gptLoaded = map[*Lib]*GPT{}
)

// OpenGPT binds the GPT entry points of l (once per Lib) and checks their
// ABI version (sdg_abi_version against GPTABIVersion).
func OpenGPT(l *Lib) (*GPT, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: no library", ErrUnavailable)
	}
	gptMu.Lock()
	defer gptMu.Unlock()
	if g, ok := gptLoaded[l]; ok {
		return g, nil
	}
	p, err := bindTable(l, "GPT", "sdg_", GPTABIVersion,
		func(path, buf *C.char, n C.size_t) unsafe.Pointer { return unsafe.Pointer(C.sdgw_open(path, buf, n)) },
		func(t unsafe.Pointer) int { return int(C.gw_sdg_abi_version((*C.sdgw_table)(t))) })
	if err != nil {
		return nil, err
	}
	g := &GPT{lib: l, t: (*C.sdgw_table)(p), calls: make(chan *C.sdgw_call, gptCallCount)}
	for i := 0; i < gptCallCount; i++ {
		g.calls <- newGPTCall() // lives as long as the loaded library
	}
	gptLoaded[l] = g
	return g, nil
}

// Lib is the library the entry points belong to.
func (g *GPT) Lib() *Lib { return g.lib }

// ABIVersion is the library's sdg_abi_version().
func (g *GPT) ABIVersion() int { return int(C.gw_sdg_abi_version(g.t)) }

func newGPTCall() *C.sdgw_call {
	return (*C.sdgw_call)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sdgw_call{}))))
}

// call is C memory for one call: from the pool, or its own when every one
// is in use.
func (g *GPT) call() *C.sdgw_call {
	select {
	case x := <-g.calls:
		return x
	default:
		return newGPTCall()
	}
}

// done gives x back to the pool (or frees it when the pool is full).
func (g *GPT) done(x *C.sdgw_call) {
	select {
	case g.calls <- x:
	default:
		C.free(unsafe.Pointer(x))
	}
}

// check turns a status into an error carrying the library's message, which
// the wrapper copied into x on the failing thread.
func (g *GPT) check(call string, x *C.sdgw_call, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &GPTError{Call: call, Code: GPTStatus(rc), Msg: C.GoString(&x.err[0])}
}
