package hostloops

import (
	"math/rand/v2"
	"testing"
)

func TestSoftmaxCausalMatchesGo(t *testing.T) { forLevels(t, testSoftmaxCausalMatchesGo) }

func testSoftmaxCausalMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, width := range widths {
		for _, sp := range []bool{false, true} {
			r0 := r.IntN(width)
			rows := 1 + r.IntN(width-r0)
			ld := width + r.IntN(3)
			p := randRows(r, rows*ld, sp, 4)
			pc, pg := clone(p), clone(p)
			cSoftmaxCausal(pc, ld, r0, rows, width)
			goSoftmaxCausal(pg, ld, r0, rows, width)
			bitsEqual(t, "SoftmaxCausal", pc, pg)
			for i := 0; i < rows; i++ {
				for j := r0 + i + 1; j < width; j++ {
					if pg[i*ld+j] != 0 {
						t.Fatalf("SoftmaxCausal: row %d (query %d) has %v at key %d", i, r0+i, pg[i*ld+j], j)
					}
				}
			}
			dp := randRows(r, rows*ld, sp, 1)
			dc, dg := clone(dp), clone(dp)
			cSoftmaxCausalBackward(dc, pg, ld, r0, rows, width)
			goSoftmaxCausalBackward(dg, pg, ld, r0, rows, width)
			bitsEqual(t, "SoftmaxCausalBackward", dc, dg)
		}
	}
}

// The loops alone, C against Go, at gpt-tiny sizes: the causal softmax of
// one head (128 queries of 128 keys).
func BenchmarkSoftmaxCausal(b *testing.B) {
	const t = 128
	r := rand.New(rand.NewPCG(5, 6))
	src := randRows(r, t*t, false, 2)
	p := make([]float32, t*t)
	for _, v := range []struct {
		name string
		f    func([]float32, int, int, int, int)
	}{{"c", cSoftmaxCausal}, {"go", goSoftmaxCausal}} {
		b.Run(v.name, func(b *testing.B) {
			if v.name == "c" {
				needC(b)
			}
			b.SetBytes(int64(4 * t * (t + 1)))
			for b.Loop() {
				copy(p, src)
				v.f(p, t, 0, t, t)
			}
		})
	}
}
