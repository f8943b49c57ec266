package hostloops

import (
	"math"
	"math/rand/v2"
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

// dot8 is sum8 over the products rounded to float32: the order of every
// eight-lane dot product here (RMSNorm's Σx², the softmax backward's Σp·dp).
func TestDot8IsSum8OfProducts(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range append(widths, 0, 4099) {
		a, b := randRows(r, n, true, 2), randRows(r, n, true, 2)
		p := make([]float32, n)
		for i := range p {
			p[i] = a[i] * b[i]
		}
		if got, want := dot8(a, b), sum8(p); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("n=%d: dot8 %v, sum8 of the products %v", n, got, want)
		}
	}
}
