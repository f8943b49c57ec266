package datasets

import (
	"slices"
	"strings"
	"testing"
)

// rowsDataset has n samples of shape [2, 3]; value k of sample i is
// 10*i + k and its label is i mod classes.
func rowsDataset(t testing.TB, n, classes int) *InMemory {
	t.Helper()
	x := make([]float32, n*6)
	y := make([]int32, n)
	for i := range n {
		for k := range 6 {
			x[i*6+k] = float32(10*i + k)
		}
		y[i] = int32(i % classes)
	}
	d, err := NewInMemory(x, y, []int{2, 3}, classes)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestNewInMemoryErrors(t *testing.T) {
	cases := []struct {
		name    string
		x       []float32
		y       []int32
		shape   []int
		classes int
		want    string
	}{
		{"empty", nil, nil, []int{4}, 3, "empty dataset"},
		{"no shape", make([]float32, 2), []int32{0, 1}, nil, 3, "sample shape is empty"},
		{"zero dimension", nil, []int32{0}, []int{0, 4}, 3, "dimensions must be positive"},
		{"no classes", make([]float32, 4), []int32{0}, []int{4}, 0, "need at least one"},
		{"short x", make([]float32, 7), []int32{0, 1}, []int{4}, 3, "7 values for 2 samples of shape [4]: want 8"},
		{"label too large", make([]float32, 8), []int32{0, 3}, []int{4}, 3, "label 3 of sample 1 is outside [0, 3)"},
		{"negative label", make([]float32, 8), []int32{-1, 0}, []int{4}, 3, "label -1 of sample 0"},
	}
	for _, c := range cases {
		if _, err := NewInMemory(c.x, c.y, c.shape, c.classes); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestGather(t *testing.T) {
	d := rowsDataset(t, 5, 3)
	if d.Len() != 5 || d.Classes() != 3 || d.SampleSize() != 6 || !slices.Equal(d.SampleShape(), []int{2, 3}) {
		t.Fatalf("Len %d, Classes %d, SampleSize %d, SampleShape %v", d.Len(), d.Classes(), d.SampleSize(), d.SampleShape())
	}
	x := make([]float32, 4*6)
	for i := range x {
		x[i] = 99 // padding rows must be cleared
	}
	y := make([]int32, 4)
	d.Gather([]int{4, -1, 0, 4}, x, y)
	want := []float32{
		40, 41, 42, 43, 44, 45,
		0, 0, 0, 0, 0, 0,
		0, 1, 2, 3, 4, 5,
		40, 41, 42, 43, 44, 45,
	}
	if !slices.Equal(x, want) || !slices.Equal(y, []int32{1, -1, 0, 1}) {
		t.Fatalf("Gather: x %v y %v", x, y)
	}
}

func TestGatherDoesNotAllocate(t *testing.T) {
	d := rowsDataset(t, 100, 10)
	idx := []int{3, 99, -1, 0, 50, -1, 7, 8}
	x := make([]float32, len(idx)*d.SampleSize())
	y := make([]int32, len(idx))
	if allocs := testing.AllocsPerRun(100, func() { d.Gather(idx, x, y) }); allocs != 0 {
		t.Fatalf("Gather allocates %v times per call", allocs)
	}
}

func TestGatherPanicsOnProgrammingErrors(t *testing.T) {
	d := rowsDataset(t, 5, 3)
	for name, f := range map[string]func(){
		"index past the end": func() { d.Gather([]int{5}, make([]float32, 6), make([]int32, 1)) },
		"index below -1":     func() { d.Gather([]int{-2}, make([]float32, 6), make([]int32, 1)) },
		"x too short":        func() { d.Gather([]int{0, 1}, make([]float32, 11), make([]int32, 2)) },
		"y too short":        func() { d.Gather([]int{0, 1}, make([]float32, 12), make([]int32, 1)) },
	} {
		if !panics(f) {
			t.Errorf("%s: Gather did not panic", name)
		}
	}
}

func panics(f func()) (did bool) {
	defer func() { did = recover() != nil }()
	f()
	return false
}

func TestSubsetAndSplit(t *testing.T) {
	d := rowsDataset(t, 10, 3)
	sub := d.Subset(4)
	if sub.Len() != 4 || !slices.Equal(sub.Y, d.Y[:4]) || !slices.Equal(sub.X, d.X[:24]) {
		t.Fatalf("Subset(4): %d samples, labels %v", sub.Len(), sub.Y)
	}
	if d.Subset(10) != d || d.Subset(1000) != d {
		t.Error("Subset(n >= Len) does not return the dataset itself")
	}
	head, tail := d.Split(3)
	if head.Len() != 7 || tail.Len() != 3 || tail.X[0] != 70 || !slices.Equal(tail.Y, []int32{1, 2, 0}) {
		t.Fatalf("Split(3): %d and %d samples, tail starts with %v, labels %v", head.Len(), tail.Len(), tail.X[0], tail.Y)
	}
	// Appending to a part must not overwrite the other part.
	_ = append(head.Y, 2)
	if tail.Y[0] != 1 {
		t.Error("appending to the head overwrote the tail")
	}
	for name, f := range map[string]func(){
		"Subset(0)":  func() { d.Subset(0) },
		"Split(0)":   func() { d.Split(0) },
		"Split(Len)": func() { d.Split(10) },
	} {
		if !panics(f) {
			t.Errorf("%s did not panic", name)
		}
	}
}

func TestNormalizeAndMeanStd(t *testing.T) {
	d, err := NewInMemory([]float32{1, 3, 5, 7}, []int32{0, 1}, []int{2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	mean, std := d.MeanStd()
	if mean != 4 || std != float32(2.236068) { // sqrt(5)
		t.Fatalf("MeanStd = %v, %v; want 4, sqrt(5)", mean, std)
	}
	d.Normalize(4, 0.5)
	if !slices.Equal(d.X, []float32{-6, -2, 2, 6}) {
		t.Fatalf("Normalize(4, 0.5) gave %v", d.X)
	}
	if !panics(func() { d.Normalize(0, 0) }) {
		t.Error("Normalize with std 0 did not panic")
	}
}

func TestClassCounts(t *testing.T) {
	if got := rowsDataset(t, 10, 4).ClassCounts(); !slices.Equal(got, []int{3, 3, 2, 2}) {
		t.Fatalf("ClassCounts = %v", got)
	}
}
