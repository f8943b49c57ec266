// Package hostloops holds the float32 loops that run every training step on
// the host (CPU), one file per concern: the element-wise folds, the finite
// check and the norm's sum of squares (vector.go), the bias and ReLU passes
// (activation.go), the optimizer updates (optimizer.go), the row loops of a
// transformer block (layernorm.go, gelu.go, attention.go's causal softmax,
// indexing.go's embedding gathers and scatters), a Llama block's RMSNorm,
// SwiGLU and rotary embedding (llama.go), the classifier's
// softmax cross-entropy row (crossentropy.go, Go only), and what the row
// loops share (lanes.go: eight-lane sums, exp32).
// The CPU engine (compute/cpu), the optimizers (optim), the trainer (ddp)
// and the CPU comm backends' folds run them; the CUDA engine's emulated
// device (compute/cuda/cudatest) runs them as its reference kernels, so that
// both engines do the same float operations in the same order.
//
// Each loop with a C variant has two implementations that give the same
// bits: a Go one (the reference, and what a build without cgo runs), in the
// concern's .go file, and a C one beside it in the concern's .h file, built
// by cgo with the compiler's vectoriser in an AVX2 and a baseline x86-64
// variant picked at start-up (other architectures build the portable C
// alone). Both do each element's IEEE float32 operations in the same order
// and never fuse a multiply and an add (fp-contract off). The row loops sum
// in eight fixed lanes (sum8 in lanes.go), which the C code keeps in
// vectors, and take e^x from this package's own float32 function (exp32:
// range reduction and a polynomial, nothing from libm), which the C
// compiler vectorises and the Go code computes with the same operations.
// So the choice does not change a result; the tests compare both, at both
// instruction sets, on random and special values (±0, ±Inf, NaN,
// subnormals, exp's clamp) at every alignment and length. One exception:
// where a NaN comes out, it is a NaN in both, but its sign and payload may
// differ (the processor's default NaN, or which of two NaN operands it
// passes on, depends on the instruction). A run with a NaN among its
// parameters has failed anyway, and every PE runs the same loops.
//
// The C loops are two translation units, one per set of compiler options:
// elementwise.c (vector.h, activation.h, optimizer.h) and rows.c (lanes.h,
// layernorm.h, gelu.h, attention.h, indexing.h). rows.c also lets the
// compiler assume that no floating-point operation traps, which changes no
// value; the element-wise loops keep the code they were measured with.
// hostloops.c picks the instruction set for both.
//
// SYMDDP_VEC=go makes the process use the Go loops (to compare speed, or to
// rule the C code out when hunting a bug). The element-wise loops run in Go
// either way for slices shorter than minC: a cgo call costs about as much
// as that many elements.
//
// The functions with a C variant check slice lengths (the C code must not
// run past a slice) and panic on a short one; shapes are the callers' to
// check.
package hostloops

import (
	"fmt"

	"github.com/symddp/symddp/internal/settings"
)

// minC is the length below which the element-wise loops run in Go even
// when C is on.
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

// atLeast panics unless every one of lens is at least n: the C loops must
// not read or write past a slice.
func atLeast(op string, n int, lens ...int) {
	for _, m := range lens {
		if m < n {
			panicShort(op, m, n)
		}
	}
}

// panicShort is out of line, so that the formatting is not inlined into
// every caller of atLeast.
//
//go:noinline
func panicShort(op string, m, n int) {
	panic(fmt.Sprintf("hostloops: %s: slice of %d elements, want at least %d", op, m, n))
}

//go:noinline
func panicArgs(op string, args ...int) {
	panic(fmt.Sprintf("hostloops: %s: bad dimensions %v", op, args))
}
