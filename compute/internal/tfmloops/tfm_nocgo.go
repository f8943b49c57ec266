//go:build !cgo

package tfmloops

const cAvailable = false

// Without cgo the C entry points are never reached (useC is false); these
// keep the callers compiling.

func cLevel() string { return "" }
func cUseBase(bool)  {}
func cLayerNorm(y, mean, rstd, x, w, b []float32, rows, c int, eps float32) {
	goLayerNorm(y, mean, rstd, x, w, b, rows, c, eps)
}
func cLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd []float32, rows, c int, addDX bool) {
	goLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, c, addDX)
}
func cGELU(y, x []float32)              { goGELU(y, x) }
func cGELUBackward(dx, dy, x []float32) { goGELUBackward(dx, dy, x) }
func cSoftmaxCausal(p []float32, ld, r0, rows, width int) {
	goSoftmaxCausal(p, ld, r0, rows, width)
}
func cSoftmaxCausalBackward(ds, p []float32, ld, r0, rows, width int) {
	goSoftmaxCausalBackward(ds, p, ld, r0, rows, width)
}
func cGatherRows(dst, table []float32, idx []int32, c int, accumulate bool) {
	goGatherRows(dst, table, idx, c, accumulate)
}
func cScatterAddRows(table, src []float32, idx []int32, c int) { goScatterAddRows(table, src, idx, c) }
