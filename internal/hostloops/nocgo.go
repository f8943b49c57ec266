//go:build !cgo

package hostloops

const cAvailable = false

// Without cgo the C entry points are never reached (useC is false); these
// keep the callers compiling.

func cLevel() string { return "" }
func cUseBase(bool)  {}

func cSum2(dst, a, b []float32)                          { goSum2(dst, a, b) }
func cAcc1(dst, a []float32)                             { goAcc1(dst, a) }
func cAcc2(dst, a, b []float32)                          { goAcc2(dst, a, b) }
func cScale(x []float32, s float32)                      { goScale(x, s) }
func cAllFinite(x []float32) bool                        { return goAllFinite(x) }
func cReLUMask(d, y []float32)                           { goReLUMask(d, y) }
func cBiasAct(y, bias []float32, rows, n int, relu bool) { goBiasAct(y, bias, rows, n, relu) }
func cColSums(s, d []float32, rows, n int)               { goColSums(s, d, rows, n) }
func cSGD(p, g []float32, lr, wd float32)                { goSGD(p, g, lr, wd) }
func cSGDMomentum(p, g, buf []float32, lr, wd, mu float32, nesterov, first bool) {
	goSGDMomentum(p, g, buf, lr, wd, mu, nesterov, first)
}
func cAdam(p, g, m, v []float32, a *AdamArgs) { goAdam(p, g, m, v, a) }

func cLayerNorm(y, mean, rstd, x, w, b []float32, rows, c int, eps float32) {
	goLayerNorm(y, mean, rstd, x, w, b, rows, c, eps)
}
func cLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd []float32, rows, c int, addDX bool) {
	goLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, c, addDX)
}
func cGELU(y, x []float32)              { goGELU(y, x) }
func cGELUBackward(dx, dy, x []float32) { goGELUBackward(dx, dy, x) }
func cRMSNorm(y, rstd, x, w []float32, rows, c int, eps float32) {
	goRMSNorm(y, rstd, x, w, rows, c, eps)
}
func cRMSNormBackward(dx, dw, dy, x, w, rstd []float32, rows, c int, addDX bool) {
	goRMSNormBackward(dx, dw, dy, x, w, rstd, rows, c, addDX)
}
func cSwiGLU(y, ab []float32, rows, f int)               { goSwiGLU(y, ab, rows, f) }
func cSwiGLUBackward(dab, dy, ab []float32, rows, f int) { goSwiGLUBackward(dab, dy, ab, rows, f) }
func cRotate(y, x, cos, sin []float32, rows, width, ld, hs, t int, inverse bool) {
	goRotate(y, x, cos, sin, rows, width, ld, hs, t, inverse)
}
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

func cXentRow(x, g []float32, scale float32) (best int, m, sum float64, ok bool) {
	return 0, 0, 0, false
}
