//go:build cgo

package blas

/*
#cgo LDFLAGS: -ldl
#cgo noescape symddp_sgemm
#cgo nocallback symddp_sgemm
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

// CBLAS constants (cblas.h); the ABI passes the enums as int.
enum { symddp_row_major = 101, symddp_no_trans = 111, symddp_trans = 112 };

typedef void (*symddp_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                                const float *, int, float, float *, int);
typedef void (*symddp_set_threads_fn)(int);
typedef int (*symddp_get_threads_fn)(void);
typedef char *(*symddp_get_config_fn)(void);

static void symddp_sgemm(void *f, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta,
                         float *c, int ldc) {
	((symddp_sgemm_fn)f)(symddp_row_major, ta ? symddp_trans : symddp_no_trans,
	                     tb ? symddp_trans : symddp_no_trans, m, n, k, alpha, a, lda, b, ldb,
	                     beta, c, ldc);
}
// symddp_dlopen opens name and, on failure, copies dlerror's message into
// err in the same C call: dlerror's state is per thread, and a goroutine may
// move to another thread between two cgo calls.
static void *symddp_dlopen(const char *name, char *err, size_t cap) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *m = dlerror();
		snprintf(err, cap, "%s", m ? m : "dlopen failed");
	}
	return h;
}
static void symddp_set_threads(void *f, int n) { ((symddp_set_threads_fn)f)(n); }
static int symddp_get_threads(void *f) { return ((symddp_get_threads_fn)f)(); }
static const char *symddp_get_config(void *f) { return ((symddp_get_config_fn)f)(); }
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// libraryNames are tried in order: Debian's libopenblas0 installs the first.
var libraryNames = []string{"libopenblas.so.0", "libopenblas.so"}

// library is a loaded OpenBLAS.
type library struct {
	path       string
	sgemmFn    unsafe.Pointer // cblas_sgemm
	setThreadF unsafe.Pointer // openblas_set_num_threads
	getThreadF unsafe.Pointer // openblas_get_num_threads
	configFn   unsafe.Pointer // openblas_get_config, may be nil
}

// loadOpenBLAS dlopens the first library of libraryNames that loads and
// resolves the symbols the engine needs.
func loadOpenBLAS() (*library, error) {
	var errs []string
	for _, name := range libraryNames {
		var msg [512]C.char
		cname := C.CString(name)
		h := C.symddp_dlopen(cname, &msg[0], C.size_t(len(msg)))
		C.free(unsafe.Pointer(cname))
		if h == nil {
			m := C.GoString(&msg[0])
			if !strings.Contains(m, name) {
				m = name + ": " + m
			}
			errs = append(errs, m)
			continue
		}
		lib := &library{path: name}
		var missing []string
		for _, s := range []struct {
			name string
			dst  *unsafe.Pointer
		}{
			{"cblas_sgemm", &lib.sgemmFn},
			{"openblas_set_num_threads", &lib.setThreadF},
			{"openblas_get_num_threads", &lib.getThreadF},
			{"openblas_get_config", &lib.configFn},
		} {
			csym := C.CString(s.name)
			*s.dst = C.dlsym(h, csym)
			C.free(unsafe.Pointer(csym))
			if *s.dst == nil && s.name != "openblas_get_config" {
				missing = append(missing, s.name)
			}
		}
		if len(missing) > 0 {
			C.dlclose(h)
			errs = append(errs, fmt.Sprintf("%s: missing %s", name, strings.Join(missing, ", ")))
			continue
		}
		return lib, nil // the handle stays open for the life of the process
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

// sgemm calls cblas_sgemm in row-major order on validated arguments with
// m, n, k > 0.
func (l *library) sgemm(aT, bT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	C.symddp_sgemm(l.sgemmFn, cbool(aT), cbool(bT), C.int(m), C.int(n), C.int(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(&a[0])), C.int(lda), (*C.float)(unsafe.Pointer(&b[0])), C.int(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
}

func (l *library) setThreads(n int) { C.symddp_set_threads(l.setThreadF, C.int(n)) }

func (l *library) threads() int { return int(C.symddp_get_threads(l.getThreadF)) }

// config is OpenBLAS's build description ("OpenBLAS 0.3.21 DYNAMIC_ARCH ...").
func (l *library) config() string {
	if l.configFn == nil {
		return "OpenBLAS"
	}
	return strings.TrimSpace(C.GoString(C.symddp_get_config(l.configFn)))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
