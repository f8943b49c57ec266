//go:build !cgo

package vec

const cAvailable = false

// Without cgo the C entry points are never reached (useC is false); these
// keep the callers compiling.

func cLevel() string                                     { return "" }
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
