package computetest

import (
	"testing"

	"github.com/symddp/symddp/compute"
)

func testVector(t *testing.T, e compute.Engine) {
	a := tensorOf(e, []float32{1, -2, 3, 4}, 2, 2)
	b := tensorOf(e, []float32{0.5, 0.5, -1, 2}, 4)
	e.Accumulate(a, b)
	if got, want := read(e, a), []float32{1.5, -1.5, 2, 6}; !equal(got, want) {
		t.Errorf("Accumulate: %v, want %v", got, want)
	}
	e.Scale(a, 2)
	if got, want := read(e, a), []float32{3, -3, 4, 12}; !equal(got, want) {
		t.Errorf("Scale: %v, want %v", got, want)
	}
	if got, want := e.SumSquares(a), 9.0+9+16+144; got != want {
		t.Errorf("SumSquares = %v, want %v", got, want)
	}
	// SumSquares accumulates in float64: 2^24 + 1 is not a float32.
	big := tensorOf(e, []float32{4096, 1}, 2)
	if got := e.SumSquares(big); got != 1<<24+1 {
		t.Errorf("SumSquares([4096 1]) = %v, want %v", got, 1<<24+1)
	}
	e.Copy(b, a)
	if got, want := read(e, b), []float32{3, -3, 4, 12}; !equal(got, want) {
		t.Errorf("Copy: %v, want %v", got, want)
	}
	e.Zero(a)
	if got, want := read(e, a), []float32{0, 0, 0, 0}; !equal(got, want) {
		t.Errorf("Zero: %v, want %v", got, want)
	}
	if got, want := read(e, b), []float32{3, -3, 4, 12}; !equal(got, want) {
		t.Errorf("Copy's destination changed with its source: %v, want %v", got, want)
	}
	l := e.AllocLabels(3)
	if l.Len() != 3 {
		t.Errorf("AllocLabels(3).Len() = %d", l.Len())
	}
	if z := e.Alloc(2, 3); z.Size() != 6 || !equal(read(e, z), make([]float32, 6)) || !equalInts(z.Shape(), []int{2, 3}) {
		t.Errorf("Alloc(2, 3) = shape %v, values %v; want 6 zeros of shape [2 3]", z.Shape(), read(e, z))
	}
	if err := e.Sync(); err != nil {
		t.Errorf("Sync: %v", err)
	}
}

func testSizePanics(t *testing.T, e compute.Engine) {
	expectPanic(t, "Accumulate of different sizes", func() { e.Accumulate(e.Alloc(3), e.Alloc(4)) }, "[3]", "[4]")
	expectPanic(t, "Copy of different sizes", func() { e.Copy(e.Alloc(3), e.Alloc(2, 2)) }, "[3]", "[2 2]")
	expectPanic(t, "SetTensor with too few values", func() { e.SetTensor(e.Alloc(2, 2), []float32{1}) }, "[2 2]")
	expectPanic(t, "ReadTensor into too little room", func() { e.ReadTensor(make([]float32, 5), e.Alloc(2, 2)) }, "[2 2]")
	expectPanic(t, "SetLabels with too many labels", func() { e.SetLabels(e.AllocLabels(2), []int32{0, 1, 2}) }, "3")
}

func equalInts(a []int, b []int) bool {
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
