//go:build cgo

package vec

/*
#cgo CFLAGS: -O3
#cgo noescape sdv_sum2
#cgo nocallback sdv_sum2
#cgo noescape sdv_acc1
#cgo nocallback sdv_acc1
#cgo noescape sdv_acc2
#cgo nocallback sdv_acc2
#cgo noescape sdv_scale
#cgo nocallback sdv_scale
#cgo noescape sdv_all_finite
#cgo nocallback sdv_all_finite
#cgo noescape sdv_relu_mask
#cgo nocallback sdv_relu_mask
#cgo noescape sdv_bias_act
#cgo nocallback sdv_bias_act
#cgo noescape sdv_col_sums
#cgo nocallback sdv_col_sums
#cgo noescape sdv_sgd
#cgo nocallback sdv_sgd
#cgo noescape sdv_sgd_momentum
#cgo nocallback sdv_sgd_momentum
#cgo noescape sdv_adam
#cgo nocallback sdv_adam
#cgo LDFLAGS: -lm
#include "vec.h"
*/
import "C"

const cAvailable = true

var level = C.GoString(C.sdv_init())

func cLevel() string { return level }

// ptr is the address of s's first element; callers pass non-empty slices.
func ptr(s []float32) *C.float { return (*C.float)(&s[0]) }

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func cSum2(dst, a, b []float32) { C.sdv_sum2(ptr(dst), ptr(a), ptr(b), C.long(len(dst))) }
func cAcc1(dst, a []float32)    { C.sdv_acc1(ptr(dst), ptr(a), C.long(len(dst))) }
func cAcc2(dst, a, b []float32) { C.sdv_acc2(ptr(dst), ptr(a), ptr(b), C.long(len(dst))) }
func cScale(x []float32, s float32) {
	C.sdv_scale(ptr(x), C.float(s), C.long(len(x)))
}
func cAllFinite(x []float32) bool { return C.sdv_all_finite(ptr(x), C.long(len(x))) != 0 }
func cReLUMask(d, y []float32)    { C.sdv_relu_mask(ptr(d), ptr(y), C.long(len(d))) }

func cBiasAct(y, bias []float32, rows, n int, relu bool) {
	var b *C.float
	if bias != nil {
		b = ptr(bias)
	}
	C.sdv_bias_act(ptr(y), b, C.long(rows), C.long(n), cbool(relu))
}

func cColSums(s, d []float32, rows, n int) {
	C.sdv_col_sums(ptr(s), ptr(d), C.long(rows), C.long(n))
}

func cSGD(p, g []float32, lr, wd float32) {
	C.sdv_sgd(ptr(p), ptr(g), C.float(lr), C.float(wd), C.long(len(p)))
}

func cSGDMomentum(p, g, buf []float32, lr, wd, mu float32, nesterov, first bool) {
	C.sdv_sgd_momentum(ptr(p), ptr(g), ptr(buf), C.float(lr), C.float(wd), C.float(mu),
		cbool(nesterov), cbool(first), C.long(len(p)))
}

func cAdam(p, g, m, v []float32, a *AdamArgs) {
	C.sdv_adam(ptr(p), ptr(g), ptr(m), ptr(v), C.float(a.Decay), C.float(a.L2), C.float(a.Beta1),
		C.float(a.Beta2), C.float(a.C1), C.float(a.C2), C.float(a.Eps), C.float(a.StepSize),
		C.float(a.BC2Sqrt), C.long(len(p)))
}
