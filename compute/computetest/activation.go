package computetest

import (
	"testing"

	"github.com/symddp/symddp/compute"
)

func testBiasAct(t *testing.T, e compute.Engine) {
	yv := []float32{-1, 0.5, 2, 0, -3, 1}
	bv := []float32{0.5, -1, -2}
	cases := []struct {
		name string
		bias bool
		act  compute.Activation
		want []float32
	}{
		{"bias+identity", true, compute.Identity, []float32{-0.5, -0.5, 0, 0.5, -4, -1}},
		{"bias+relu", true, compute.ReLU, []float32{0, 0, 0, 0.5, 0, 0}},
		{"relu", false, compute.ReLU, []float32{0, 0.5, 2, 0, 0, 1}},
		{"identity", false, compute.Identity, yv},
	}
	for _, c := range cases {
		y := tensorOf(e, yv, 2, 3)
		var bias compute.Tensor
		if c.bias {
			bias = tensorOf(e, bv, 3)
		}
		e.BiasAct(y, bias, c.act)
		if got := read(e, y); !equal(got, c.want) {
			t.Errorf("%s: y = %v, want %v", c.name, got, c.want)
		}
	}
	expectPanic(t, "BiasAct with a bias of the wrong length",
		func() { e.BiasAct(e.Alloc(2, 3), e.Alloc(2), compute.ReLU) }, "[2 3]", "[2]")
}

func testBiasActBackward(t *testing.T, e compute.Engine) {
	// y is ReLU's output: 0 where the input was <= 0.
	yv := []float32{0, 0.5, 2, 1, 0, 3}
	dyv := []float32{1, 2, 3, 4, 5, 6}
	dy, y, db := tensorOf(e, dyv, 2, 3), tensorOf(e, yv, 2, 3), tensorOf(e, []float32{100, 100, 100}, 3)
	e.BiasActBackward(dy, y, db, compute.ReLU, false)
	if got, want := read(e, dy), []float32{0, 2, 3, 4, 0, 6}; !equal(got, want) {
		t.Errorf("relu: dy = %v, want %v", got, want)
	}
	if got, want := read(e, db), []float32{4, 2, 9}; !equal(got, want) {
		t.Errorf("relu: dbias = %v, want %v (overwritten)", got, want)
	}
	// Identity leaves dy alone; accumulate adds the column sums.
	dy = tensorOf(e, dyv, 2, 3)
	e.BiasActBackward(dy, y, db, compute.Identity, true)
	if got := read(e, dy); !equal(got, dyv) {
		t.Errorf("identity: dy = %v, want %v", got, dyv)
	}
	if got, want := read(e, db), []float32{4 + 5, 2 + 7, 9 + 9}; !equal(got, want) {
		t.Errorf("identity, accumulate: dbias = %v, want %v", got, want)
	}
	// No bias: only the mask.
	dy = tensorOf(e, dyv, 2, 3)
	e.BiasActBackward(dy, y, nil, compute.ReLU, false)
	if got, want := read(e, dy), []float32{0, 2, 3, 4, 0, 6}; !equal(got, want) {
		t.Errorf("relu without bias: dy = %v, want %v", got, want)
	}
	expectPanic(t, "BiasActBackward with y of another shape",
		func() { e.BiasActBackward(e.Alloc(2, 3), e.Alloc(3, 2), nil, compute.ReLU, false) }, "[2 3]", "[3 2]")
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
