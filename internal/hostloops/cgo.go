//go:build cgo

package hostloops

// The cgo bindings of the C loops (hostloops.h).

/*
#cgo CFLAGS: -O3
#cgo noescape sdh_xent_row
#cgo nocallback sdh_xent_row
#cgo noescape sdh_sum2
#cgo nocallback sdh_sum2
#cgo noescape sdh_acc1
#cgo nocallback sdh_acc1
#cgo noescape sdh_acc2
#cgo nocallback sdh_acc2
#cgo noescape sdh_scale
#cgo nocallback sdh_scale
#cgo noescape sdh_all_finite
#cgo nocallback sdh_all_finite
#cgo noescape sdh_relu_mask
#cgo nocallback sdh_relu_mask
#cgo noescape sdh_bias_act
#cgo nocallback sdh_bias_act
#cgo noescape sdh_col_sums
#cgo nocallback sdh_col_sums
#cgo noescape sdh_sgd
#cgo nocallback sdh_sgd
#cgo noescape sdh_sgd_momentum
#cgo nocallback sdh_sgd_momentum
#cgo noescape sdh_adam
#cgo nocallback sdh_adam
#cgo noescape sdh_layernorm
#cgo nocallback sdh_layernorm
#cgo noescape sdh_layernorm_backward
#cgo nocallback sdh_layernorm_backward
#cgo noescape sdh_gelu
#cgo nocallback sdh_gelu
#cgo noescape sdh_gelu_backward
#cgo nocallback sdh_gelu_backward
#cgo noescape sdh_rmsnorm
#cgo nocallback sdh_rmsnorm
#cgo noescape sdh_rmsnorm_backward
#cgo nocallback sdh_rmsnorm_backward
#cgo noescape sdh_swiglu
#cgo nocallback sdh_swiglu
#cgo noescape sdh_swiglu_backward
#cgo nocallback sdh_swiglu_backward
#cgo noescape sdh_rotate
#cgo nocallback sdh_rotate
#cgo noescape sdh_softmax_causal
#cgo nocallback sdh_softmax_causal
#cgo noescape sdh_softmax_causal_backward
#cgo nocallback sdh_softmax_causal_backward
#cgo noescape sdh_gather_rows
#cgo nocallback sdh_gather_rows
#cgo noescape sdh_scatter_add_rows
#cgo nocallback sdh_scatter_add_rows
#cgo LDFLAGS: -lm
#include "hostloops.h"
*/
import "C"

const cAvailable = true

var level = C.GoString(C.sdh_init())

func cLevel() string { return level }

// cUseBase switches the C loops to the baseline instruction set (on) or
// back to the best one present (off); tests only.
func cUseBase(on bool) { C.sdh_use_base(cbool(on)) }

// ptr is the address of s's first element; callers pass non-empty slices.
func ptr(s []float32) *C.float { return (*C.float)(&s[0]) }

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func cSum2(dst, a, b []float32) { C.sdh_sum2(ptr(dst), ptr(a), ptr(b), C.long(len(dst))) }
func cAcc1(dst, a []float32)    { C.sdh_acc1(ptr(dst), ptr(a), C.long(len(dst))) }
func cAcc2(dst, a, b []float32) { C.sdh_acc2(ptr(dst), ptr(a), ptr(b), C.long(len(dst))) }
func cScale(x []float32, s float32) {
	C.sdh_scale(ptr(x), C.float(s), C.long(len(x)))
}
func cAllFinite(x []float32) bool { return C.sdh_all_finite(ptr(x), C.long(len(x))) != 0 }
func cReLUMask(d, y []float32)    { C.sdh_relu_mask(ptr(d), ptr(y), C.long(len(d))) }

func cBiasAct(y, bias []float32, rows, n int, relu bool) {
	var b *C.float
	if bias != nil {
		b = ptr(bias)
	}
	C.sdh_bias_act(ptr(y), b, C.long(rows), C.long(n), cbool(relu))
}

func cColSums(s, d []float32, rows, n int) {
	C.sdh_col_sums(ptr(s), ptr(d), C.long(rows), C.long(n))
}

func cSGD(p, g []float32, lr, wd float32) {
	C.sdh_sgd(ptr(p), ptr(g), C.float(lr), C.float(wd), C.long(len(p)))
}

func cSGDMomentum(p, g, buf []float32, lr, wd, mu float32, nesterov, first bool) {
	C.sdh_sgd_momentum(ptr(p), ptr(g), ptr(buf), C.float(lr), C.float(wd), C.float(mu),
		cbool(nesterov), cbool(first), C.long(len(p)))
}

func cAdam(p, g, m, v []float32, a *AdamArgs) {
	C.sdh_adam(ptr(p), ptr(g), ptr(m), ptr(v), C.float(a.Decay), C.float(a.L2), C.float(a.Beta1),
		C.float(a.Beta2), C.float(a.C1), C.float(a.C2), C.float(a.Eps), C.float(a.StepSize),
		C.float(a.BC2Sqrt), C.long(len(p)))
}

func cLayerNorm(y, mean, rstd, x, w, b []float32, rows, c int, eps float32) {
	C.sdh_layernorm(ptr(y), ptr(mean), ptr(rstd), ptr(x), ptr(w), ptr(b), C.long(rows), C.long(c), C.float(eps))
}

func cLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd []float32, rows, c int, addDX bool) {
	C.sdh_layernorm_backward(ptr(dx), ptr(dw), ptr(db), ptr(dy), ptr(x), ptr(w), ptr(mean), ptr(rstd),
		C.long(rows), C.long(c), cbool(addDX))
}

func cGELU(y, x []float32) { C.sdh_gelu(ptr(y), ptr(x), C.long(len(x))) }

func cGELUBackward(dx, dy, x []float32) {
	C.sdh_gelu_backward(ptr(dx), ptr(dy), ptr(x), C.long(len(x)))
}

func cRMSNorm(y, rstd, x, w []float32, rows, c int, eps float32) {
	C.sdh_rmsnorm(ptr(y), ptr(rstd), ptr(x), ptr(w), C.long(rows), C.long(c), C.float(eps))
}

func cRMSNormBackward(dx, dw, dy, x, w, rstd []float32, rows, c int, addDX bool) {
	C.sdh_rmsnorm_backward(ptr(dx), ptr(dw), ptr(dy), ptr(x), ptr(w), ptr(rstd), C.long(rows), C.long(c), cbool(addDX))
}

func cSwiGLU(y, ab []float32, rows, f int) { C.sdh_swiglu(ptr(y), ptr(ab), C.long(rows), C.long(f)) }

func cSwiGLUBackward(dab, dy, ab []float32, rows, f int) {
	C.sdh_swiglu_backward(ptr(dab), ptr(dy), ptr(ab), C.long(rows), C.long(f))
}

func cRotate(y, x, cos, sin []float32, rows, width, ld, hs, t int, inverse bool) {
	C.sdh_rotate(ptr(y), ptr(x), ptr(cos), ptr(sin), C.long(rows), C.long(width), C.long(ld), C.long(hs), C.long(t), cbool(inverse))
}

// cXentRow is SoftmaxXentRow's C path (xent.c): ok false when the row is
// the Go loop's or the path does not run here (no FMA, or
// the baseline loops).
func cXentRow(x, g []float32, scale float32) (best int, m, sum float64, ok bool) {
	var cm, cs C.double
	b := C.sdh_xent_row(ptr(x), ptr(g), C.long(len(x)), C.float(scale), &cm, &cs)
	return int(b), float64(cm), float64(cs), b >= 0
}

func cSoftmaxCausal(p []float32, ld, r0, rows, width int) {
	C.sdh_softmax_causal(ptr(p), C.long(ld), C.long(r0), C.long(rows), C.long(width))
}

func cSoftmaxCausalBackward(ds, p []float32, ld, r0, rows, width int) {
	C.sdh_softmax_causal_backward(ptr(ds), ptr(p), C.long(ld), C.long(r0), C.long(rows), C.long(width))
}

func cGatherRows(dst, table []float32, idx []int32, c int, accumulate bool) {
	C.sdh_gather_rows(ptr(dst), ptr(table), (*C.int32_t)(&idx[0]), C.long(len(idx)), C.long(c), cbool(accumulate))
}

func cScatterAddRows(table, src []float32, idx []int32, c int) {
	C.sdh_scatter_add_rows(ptr(table), ptr(src), (*C.int32_t)(&idx[0]), C.long(len(idx)), C.long(c))
}
