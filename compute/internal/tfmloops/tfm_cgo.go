//go:build cgo

package tfmloops

/*
#cgo CFLAGS: -O3
#cgo noescape sdt_layernorm
#cgo nocallback sdt_layernorm
#cgo noescape sdt_layernorm_backward
#cgo nocallback sdt_layernorm_backward
#cgo noescape sdt_gelu
#cgo nocallback sdt_gelu
#cgo noescape sdt_gelu_backward
#cgo nocallback sdt_gelu_backward
#cgo noescape sdt_softmax_causal
#cgo nocallback sdt_softmax_causal
#cgo noescape sdt_softmax_causal_backward
#cgo nocallback sdt_softmax_causal_backward
#cgo noescape sdt_gather_rows
#cgo nocallback sdt_gather_rows
#cgo noescape sdt_scatter_add_rows
#cgo nocallback sdt_scatter_add_rows
#cgo LDFLAGS: -lm
#include "tfm.h"
*/
import "C"

const cAvailable = true

var level = C.GoString(C.sdt_init())

func cLevel() string { return level }

// cUseBase switches the C loops to the baseline instruction set (on) or
// back to the best one present (off); tests only.
func cUseBase(on bool) { C.sdt_use_base(cbool(on)) }

// ptr is the address of s's first element; callers pass non-empty slices.
func ptr(s []float32) *C.float { return (*C.float)(&s[0]) }

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func cLayerNorm(y, mean, rstd, x, w, b []float32, rows, c int, eps float32) {
	C.sdt_layernorm(ptr(y), ptr(mean), ptr(rstd), ptr(x), ptr(w), ptr(b), C.long(rows), C.long(c), C.float(eps))
}

func cLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd []float32, rows, c int, addDX bool) {
	C.sdt_layernorm_backward(ptr(dx), ptr(dw), ptr(db), ptr(dy), ptr(x), ptr(w), ptr(mean), ptr(rstd),
		C.long(rows), C.long(c), cbool(addDX))
}

func cGELU(y, x []float32) { C.sdt_gelu(ptr(y), ptr(x), C.long(len(x))) }

func cGELUBackward(dx, dy, x []float32) {
	C.sdt_gelu_backward(ptr(dx), ptr(dy), ptr(x), C.long(len(x)))
}

func cSoftmaxCausal(p []float32, ld, r0, rows, width int) {
	C.sdt_softmax_causal(ptr(p), C.long(ld), C.long(r0), C.long(rows), C.long(width))
}

func cSoftmaxCausalBackward(ds, p []float32, ld, r0, rows, width int) {
	C.sdt_softmax_causal_backward(ptr(ds), ptr(p), C.long(ld), C.long(r0), C.long(rows), C.long(width))
}

func cGatherRows(dst, table []float32, idx []int32, c int, accumulate bool) {
	C.sdt_gather_rows(ptr(dst), ptr(table), (*C.int32_t)(&idx[0]), C.long(len(idx)), C.long(c), cbool(accumulate))
}

func cScatterAddRows(table, src []float32, idx []int32, c int) {
	C.sdt_scatter_add_rows(ptr(table), ptr(src), (*C.int32_t)(&idx[0]), C.long(len(idx)), C.long(c))
}
