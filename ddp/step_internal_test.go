package ddp

import (
	"math"
	"testing"
)

func TestAllFinite(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 8, 1001} {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(i) - 1e30
		}
		if !allFinite(s) {
			t.Fatalf("n=%d: finite values reported as not finite", n)
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			for i := range s {
				old := s[i]
				s[i] = bad
				if allFinite(s) {
					t.Fatalf("n=%d: %v at %d not found", n, bad, i)
				}
				s[i] = old
			}
		}
	}
}
