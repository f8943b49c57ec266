package fold

import (
	"math"
	"testing"

	"github.com/symddp/symddp/comm"
)

// TestFoldIsThePEOrderFold checks the unrolled kernels against the plain
// left fold for every PE count up to 9 and lengths around the unroll width.
func TestFoldIsThePEOrderFold(t *testing.T) {
	val := func(pe, i int) float32 {
		return float32(math.Ldexp(float64((pe*7919+i*104729)%20011-10005)/10007, (pe*3+i)%13-6))
	}
	for npes := 1; npes <= 9; npes++ {
		for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 100} {
			ins := make([][]float32, npes)
			for pe := range ins {
				ins[pe] = make([]float32, n)
				for i := range ins[pe] {
					ins[pe][i] = val(pe, i)
				}
			}
			for _, op := range []comm.Op{comm.Sum, comm.Mean, comm.Max, comm.Min} {
				acc := make([]float32, n)
				Fold(acc, ins, op)
				if op == comm.Mean {
					Divide(acc, float32(npes))
				}
				for i := range acc {
					want := ins[0][i]
					for pe := 1; pe < npes; pe++ {
						switch op {
						case comm.Sum, comm.Mean:
							want += ins[pe][i]
						case comm.Max:
							want = max(want, ins[pe][i])
						case comm.Min:
							want = min(want, ins[pe][i])
						}
					}
					if op == comm.Mean {
						want /= float32(npes)
					}
					if math.Float32bits(acc[i]) != math.Float32bits(want) {
						t.Fatalf("npes=%d n=%d %s: element %d = %v, want %v", npes, n, op, i, acc[i], want)
					}
				}
			}
		}
	}
}
