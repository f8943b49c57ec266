package hostloops

import (
	"math"
	"testing"
)

func TestExp32(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := float32(-87 + 175*float64(i)/2_000_000)
		got, want := float64(exp32(x)), math.Exp(float64(x))
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
	}
	t.Logf("exp32's worst relative error on [-87, 88]: %.3g", worst)
	// float32's epsilon is 1.19e-7: a few ulps.
	if worst > 4e-7 {
		t.Errorf("exp32's worst relative error on [-87, 88] is %.3g, want below 4e-7", worst)
	}
	for _, c := range []struct{ x, want float32 }{{0, 1}, {float32(math.Inf(1)), exp32(88)},
		{float32(math.Inf(-1)), 0}, {-100, 0}} {
		if got := exp32(c.x); got != c.want {
			t.Errorf("exp32(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if v := exp32(float32(math.NaN())); v == v {
		t.Errorf("exp32(NaN) = %v, want NaN", v)
	}
	if math.IsInf(float64(exp32(88)), 0) {
		t.Errorf("exp32(88) overflows")
	}
}
