package hostloops

import (
	"math"
	"testing"
)

func TestSoftmaxXentRow(t *testing.T) {
	x := []float32{1, 3, 2, 3}
	g := make([]float32, len(x))
	loss, hit := SoftmaxXentRow(x, g, 2, 0.5)
	sum := math.Exp(-2) + 1 + math.Exp(-1) + 1
	if want := math.Log(sum) + 1; math.Abs(loss-want) > 1e-12 {
		t.Errorf("loss %v, want %v", loss, want)
	}
	if hit {
		t.Errorf("the label 2 is not the arg-max (1, the first of two 3s) but counts as a hit")
	}
	for j, v := range x {
		want := 0.5 * math.Exp(float64(v)-3) / sum
		if j == 2 {
			want -= 0.5
		}
		if math.Abs(float64(g[j])-want) > 1e-7 {
			t.Errorf("g[%d] = %v, want %v", j, g[j], want)
		}
	}
	if _, hit := SoftmaxXentRow(x, g, 1, 1); !hit {
		t.Errorf("the label 1 (the first maximum) is not a hit")
	}
}

func TestSumSquares(t *testing.T) {
	if got := SumSquares([]float32{1, -2, 3, 0.5}); got != 14.25 {
		t.Errorf("SumSquares = %v, want 14.25", got)
	}
}
