// Package vec holds the element-wise float32 loops that run every training
// step on the CPU: the ReLU and bias passes of the engine, the gradient
// folds of the CPU backends, the finite check and the SGD update.
//
// Each loop has two implementations that give the same bits: a Go one (the
// reference, and what a build without cgo runs) and a C one, built by cgo
// with the compiler's vectoriser, in an AVX2 and a baseline x86-64 variant
// picked at start-up (other architectures build the portable C alone). The C
// code does each element's IEEE float operations in the Go code's order and
// never fuses a multiply and an add (fp-contract off), so the choice does
// not change a result; the tests compare both on random and special values
// (±0, ±Inf, NaN, subnormals) at every alignment and length. One exception:
// where a NaN comes out, it is a NaN in both, but its sign and payload may
// differ (the processor's default NaN, or which of two NaN operands it
// passes on, depends on the instruction). A run with a NaN among its
// parameters has failed anyway, and every PE runs the same loops.
//
// SYMDDP_VEC=go makes the process use the Go loops (to compare speed, or to
// rule the C code out when hunting a bug). Slices shorter than minC run in
// Go either way: a cgo call costs about as much as that many elements.
package vec

import (
	"fmt"

	"github.com/symddp/symddp/internal/settings"
)

// minC is the length below which the Go loop runs even when C is on.
const minC = 64

// useC reports whether the C loops are in use: built with cgo and not
// turned off with SYMDDP_VEC=go.
var useC = cAvailable && settings.Get(settings.Vec) != "go"

// Impl describes the loops in use, for logs: "go" or "c/avx2" and the like.
func Impl() string {
	if !useC {
		return "go"
	}
	return "c/" + cLevel()
}

// same panics unless every one of others is at least n: the C loops must
// not read or write past a slice.
func same(op string, n int, others ...int) {
	for _, m := range others {
		if m < n {
			panicShort(op, m, n)
		}
	}
}

// panicShort is out of line, so that the formatting is not inlined into
// every caller of same.
//
//go:noinline
func panicShort(op string, m, n int) {
	panic(fmt.Sprintf("vec: %s: slice of %d elements, want at least %d", op, m, n))
}

// Sum2 sets dst[i] = a[i] + b[i].
func Sum2(dst, a, b []float32) {
	n := len(dst)
	same("Sum2", n, len(a), len(b))
	if !useC || n < minC {
		goSum2(dst, a[:n], b[:n])
		return
	}
	cSum2(dst, a, b)
}

// Acc1 sets dst[i] += a[i].
func Acc1(dst, a []float32) {
	n := len(dst)
	same("Acc1", n, len(a))
	if !useC || n < minC {
		goAcc1(dst, a[:n])
		return
	}
	cAcc1(dst, a)
}

// Acc2 sets dst[i] = (dst[i] + a[i]) + b[i].
func Acc2(dst, a, b []float32) {
	n := len(dst)
	same("Acc2", n, len(a), len(b))
	if !useC || n < minC {
		goAcc2(dst, a[:n], b[:n])
		return
	}
	cAcc2(dst, a, b)
}

// Scale sets x[i] *= s.
func Scale(x []float32, s float32) {
	if !useC || len(x) < minC {
		goScale(x, s)
		return
	}
	cScale(x, s)
}

// AllFinite reports whether no element of x is NaN or ±Inf.
func AllFinite(x []float32) bool {
	if !useC || len(x) < minC {
		return goAllFinite(x)
	}
	return cAllFinite(x)
}

// ReLUMask sets d[i] = +0 where y[i] <= 0 (±0 and negatives, not NaN) and
// leaves d[i] elsewhere: the gradient through a ReLU whose output is y.
func ReLUMask(d, y []float32) {
	n := len(d)
	same("ReLUMask", n, len(y))
	if !useC || n < minC {
		goReLUMask(d, y[:n])
		return
	}
	cReLUMask(d, y)
}

// BiasAct sets each of the rows of y (rows × n, row-major) to
// y + bias (bias nil: no bias) and then, with relu, to max(·, 0) (Go's max:
// NaN stays NaN, -0 becomes +0).
func BiasAct(y, bias []float32, rows, n int, relu bool) {
	same("BiasAct", rows*n, len(y))
	if bias != nil {
		same("BiasAct", n, len(bias))
	}
	if !useC || rows*n < minC {
		goBiasAct(y, bias, rows, n, relu)
		return
	}
	cBiasAct(y, bias, rows, n, relu)
}

// ColSums adds the column sums of d (rows × n, row-major) to s (n), row by
// row in order: s[j] += d[0][j], then d[1][j], and so on.
func ColSums(s, d []float32, rows, n int) {
	same("ColSums", rows*n, len(d))
	same("ColSums", n, len(s))
	if !useC || rows*n < minC {
		goColSums(s, d, rows, n)
		return
	}
	cColSums(s, d, rows, n)
}

// SGD is plain SGD: g' = g + wd·p (wd ≠ 0), p -= lr·g'.
func SGD(p, g []float32, lr, wd float32) {
	n := len(p)
	same("SGD", n, len(g))
	if !useC || n < minC {
		goSGD(p, g[:n], lr, wd)
		return
	}
	cSGD(p, g, lr, wd)
}

// SGDMomentum is SGD with momentum buffer buf: g' = g + wd·p (wd ≠ 0);
// buf = g' on the first step, mu·buf + g' after; the step is buf, or
// g' + mu·buf with nesterov; p -= lr·step.
func SGDMomentum(p, g, buf []float32, lr, wd, mu float32, nesterov, first bool) {
	n := len(p)
	same("SGDMomentum", n, len(g), len(buf))
	if !useC || n < minC {
		goSGDMomentum(p, g[:n], buf[:n], lr, wd, mu, nesterov, first)
		return
	}
	cSGDMomentum(p, g, buf, lr, wd, mu, nesterov, first)
}

// AdamArgs are the scalars of one Adam or AdamW step.
type AdamArgs struct {
	Decay    float32 // AdamW's decoupled factor on p (1 for Adam: p·1 = p exactly)
	L2       float32 // Adam's L2 weight decay added to g (0 for AdamW)
	Beta1    float32
	Beta2    float32
	C1       float32 // 1 - Beta1
	C2       float32 // 1 - Beta2
	Eps      float32
	StepSize float32 // lr / (1 - Beta1^t)
	BC2Sqrt  float32 // sqrt(1 - Beta2^t)
}

// Adam is one step of Adam or AdamW over p with gradients g and moments m,
// v: p' = p·Decay; g' = g + L2·p' (L2 ≠ 0); m = β1·m + c1·g';
// v = β2·v + (c2·g')·g'; p = p' − (StepSize·m) / (sqrt(v)/BC2Sqrt + Eps).
func Adam(p, g, m, v []float32, a *AdamArgs) {
	n := len(p)
	same("Adam", n, len(g), len(m), len(v))
	if !useC || n < minC {
		goAdam(p, g[:n], m[:n], v[:n], a)
		return
	}
	cAdam(p, g, m, v, a)
}
