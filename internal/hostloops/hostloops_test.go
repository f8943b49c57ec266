package hostloops

import "testing"

// The exported functions check lengths (and the row loops their
// dimensions), whichever loop runs.
func TestShortSlicesPanic(t *testing.T) {
	s := func(n int) []float32 { return make([]float32, n) }
	for name, f := range map[string]func(){
		"Sum2":     func() { Sum2(s(4), s(4), s(3)) },
		"Acc1":     func() { Acc1(s(100), s(99)) },
		"ReLUMask": func() { ReLUMask(s(100), s(99)) },
		"BiasAct":  func() { BiasAct(s(100), s(9), 10, 10, true) },
		"ColSums":  func() { ColSums(s(10), s(99), 10, 10) },
		"SGDMomentum": func() {
			SGDMomentum(s(100), s(100), s(50), 1, 0, 0.9, false, false)
		},
		"LayerNorm":         func() { LayerNorm(s(20), s(2), s(2), s(19), s(10), s(10), 2, 10, 1e-5) },
		"LayerNormRows":     func() { LayerNorm(s(20), s(1), s(2), s(20), s(10), s(10), 2, 10, 1e-5) },
		"LayerNormBackward": func() { LayerNormBackward(s(20), s(10), s(9), s(20), s(20), s(10), s(2), s(2), 2, 10, false) },
		"GELU":              func() { GELU(s(9), s(10)) },
		"GELUBackward":      func() { GELUBackward(s(10), s(9), s(10)) },
		"SoftmaxCausal":     func() { SoftmaxCausal(s(15), 8, 0, 2, 8) },
		"SoftmaxCausalRows": func() { SoftmaxCausal(s(64), 8, 5, 4, 8) },
		"SoftmaxBackward":   func() { SoftmaxCausalBackward(s(16), s(15), 8, 0, 2, 8) },
		"GatherRows":        func() { GatherRows(s(3), s(8), []int32{0, 1}, 2, false) },
		"GatherRowsWidth":   func() { GatherRows(s(4), s(8), []int32{0}, 0, false) },
		"ScatterAddRows":    func() { ScatterAddRows(s(8), s(3), []int32{0, 1}, 2) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with a short slice or bad rows did not panic", name)
				}
			}()
			f()
		}()
	}
}
