// Package tfmloops holds the row loops of a transformer block on the CPU:
// layer normalisation, the GELU activation and the causal softmax of
// attention, forward and backward, and the row gathers and scatters of
// embeddings; and, Go only for now (llama.go), a Llama block's RMSNorm,
// SwiGLU and rotary embedding. compute/cpu runs them; their Go versions
// are plain reference code that another engine's emulation may reuse.
//
// Each loop has two implementations that give the same bits, as in
// internal/vec: a Go one (the reference, and what a build without cgo runs)
// and a C one, built by cgo, in an AVX2 and a baseline x86-64 variant picked
// at start-up. Both do each element's IEEE float32 operations in the same
// order, with no fused multiply-add; sums run in eight fixed lanes (see
// sum8), which the C code keeps in vectors; and e^x is this package's own
// float32 function (exp32: range reduction and a polynomial, nothing from
// libm), which the C compiler vectorises and the Go code computes with the
// same operations. So a build without cgo runs the same arithmetic, only
// slower. As in internal/vec, a NaN result is a NaN in both, but its sign
// and payload may differ.
//
// The package is not internal/vec because its loops are not element-wise
// folds: they are whole rows with reductions and exp, and only the compute
// engines use them. It honours vec's switch: SYMDDP_VEC=go makes the
// process use the Go loops.
//
// The functions check slice lengths (the C code must not run past a slice)
// and nothing else; shapes are the engine's to check.
package tfmloops

import (
	"fmt"

	"github.com/symddp/symddp/internal/settings"
)

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

// atLeast panics unless every one of lens is at least n.
func atLeast(op string, n int, lens ...int) {
	for _, m := range lens {
		if m < n {
			panicShort(op, m, n)
		}
	}
}

//go:noinline
func panicShort(op string, m, n int) {
	panic(fmt.Sprintf("tfmloops: %s: slice of %d elements, want at least %d", op, m, n))
}

//go:noinline
func panicArgs(op string, args ...int) {
	panic(fmt.Sprintf("tfmloops: %s: bad dimensions %v", op, args))
}

// LayerNorm normalises each of the rows of x (rows × c, row-major) into y:
// mean m, rstd r = 1/sqrt(var+eps) with the variance from a second pass
// over x-m, y = ((x-m)·r)·w + b; it writes mean and rstd (rows).
func LayerNorm(y, mean, rstd, x, w, b []float32, rows, c int, eps float32) {
	if rows <= 0 || c <= 0 {
		panicArgs("LayerNorm", rows, c)
	}
	atLeast("LayerNorm", rows*c, len(y), len(x))
	atLeast("LayerNorm", rows, len(mean), len(rstd))
	atLeast("LayerNorm", c, len(w), len(b))
	if !useC {
		goLayerNorm(y, mean, rstd, x, w, b, rows, c, eps)
		return
	}
	cLayerNorm(y, mean, rstd, x, w, b, rows, c, eps)
}

// LayerNormBackward takes dy (rows × c) and LayerNorm's x, w, mean, rstd,
// adds the rows' shares to dw and db (c) in row order (callers that want
// them overwritten clear them first) and sets dx (rows × c), or adds to it
// when addDX is true. dx may not be dy.
func LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd []float32, rows, c int, addDX bool) {
	if rows <= 0 || c <= 0 {
		panicArgs("LayerNormBackward", rows, c)
	}
	atLeast("LayerNormBackward", rows*c, len(dx), len(dy), len(x))
	atLeast("LayerNormBackward", rows, len(mean), len(rstd))
	atLeast("LayerNormBackward", c, len(w), len(dw), len(db))
	if !useC {
		goLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, c, addDX)
		return
	}
	cLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, c, addDX)
}

// GELU sets y[i] = gelu(x[i]) for every i of x, in the tanh approximation
// written as x/(1+e^(-2u)), u = √(2/π)·(x+0.044715·x³). y may not be x.
func GELU(y, x []float32) {
	atLeast("GELU", len(x), len(y))
	if !useC || len(x) == 0 {
		goGELU(y, x)
		return
	}
	cGELU(y, x)
}

// GELUBackward sets dx[i] = dy[i]·gelu'(x[i]) for every i of x; dx may be
// dy.
func GELUBackward(dx, dy, x []float32) {
	atLeast("GELUBackward", len(x), len(dx), len(dy))
	if !useC || len(x) == 0 {
		goGELUBackward(dx, dy, x)
		return
	}
	cGELUBackward(dx, dy, x)
}

// checkRows checks the block of rows that the softmax loops work on: rows
// rows of width elements at stride ld, row i causal up to r0+i.
func checkRows(op string, n, ld, r0, rows, width int) {
	if rows <= 0 || r0 < 0 || r0+rows > width || width > ld {
		panicArgs(op, ld, r0, rows, width)
	}
	atLeast(op, (rows-1)*ld+width, n)
}

// SoftmaxCausal turns each of the rows of p (stride ld) in place into its
// causal softmax: row i holds the scores of query r0+i against keys
// 0..width-1, and becomes the softmax of its first r0+i+1 entries, then
// zeros up to width. The entries past r0+i+1 may hold anything (the
// scores a causal query does not see); they are overwritten.
func SoftmaxCausal(p []float32, ld, r0, rows, width int) {
	checkRows("SoftmaxCausal", len(p), ld, r0, rows, width)
	if !useC {
		goSoftmaxCausal(p, ld, r0, rows, width)
		return
	}
	cSoftmaxCausal(p, ld, r0, rows, width)
}

// SoftmaxCausalBackward turns the gradient at SoftmaxCausal's output p,
// held in ds (same layout), into the gradient at its input, in place:
// p·(dp - Σ p·dp) over each row's first r0+i+1 entries, zeros up to width.
func SoftmaxCausalBackward(ds, p []float32, ld, r0, rows, width int) {
	checkRows("SoftmaxCausalBackward", len(ds), ld, r0, rows, width)
	checkRows("SoftmaxCausalBackward", len(p), ld, r0, rows, width)
	if !useC {
		goSoftmaxCausalBackward(ds, p, ld, r0, rows, width)
		return
	}
	cSoftmaxCausalBackward(ds, p, ld, r0, rows, width)
}

// badIndex returns the first i whose idx[i] is neither -1 nor below v, or
// -1 when there is none.
func badIndex(idx []int32, v int) int {
	for i, k := range idx {
		if k < -1 || int(k) >= v {
			return i
		}
	}
	return -1
}

// GatherRows sets row i of dst (rows of c) to row idx[i] of table, or adds
// it when accumulate is true; idx[i] == -1 gives a zero row (adds nothing).
// When some idx[i] is neither -1 nor a row of table it does nothing and
// returns the first such i; otherwise it returns -1.
func GatherRows(dst, table []float32, idx []int32, c int, accumulate bool) (bad int) {
	if c <= 0 {
		panicArgs("GatherRows", c)
	}
	atLeast("GatherRows", len(idx)*c, len(dst))
	if bad = badIndex(idx, len(table)/c); bad >= 0 || len(idx) == 0 {
		return bad
	}
	if !useC {
		goGatherRows(dst, table, idx, c, accumulate)
		return -1
	}
	cGatherRows(dst, table, idx, c, accumulate)
	return -1
}

// ScatterAddRows adds row i of src (rows of c) to row idx[i] of table, in
// the order of i; idx[i] == -1 adds nothing. When some idx[i] is neither -1
// nor a row of table it does nothing and returns the first such i;
// otherwise it returns -1. table may not overlap src.
func ScatterAddRows(table, src []float32, idx []int32, c int) (bad int) {
	if c <= 0 {
		panicArgs("ScatterAddRows", c)
	}
	atLeast("ScatterAddRows", len(idx)*c, len(src))
	if bad = badIndex(idx, len(table)/c); bad >= 0 || len(idx) == 0 {
		return bad
	}
	if !useC {
		goScatterAddRows(table, src, idx, c)
		return -1
	}
	cScatterAddRows(table, src, idx, c)
	return -1
}
