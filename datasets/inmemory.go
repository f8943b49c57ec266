package datasets

import (
	"fmt"
	"math"
)

// InMemory is a Dataset held in two flat slices: the samples one row each,
// and their labels.
type InMemory struct {
	// X holds Len() rows of SampleSize() values, row-major: (N, D).
	X []float32
	// Y holds the Len() labels, each in [0, Classes()).
	Y []int32

	shape   []int
	size    int
	classes int
}

var _ Dataset = (*InMemory)(nil)

// NewInMemory wraps x (N rows of product(shape) values) and y (N labels in
// [0, classes)) without copying them. It checks the sizes and the labels.
func NewInMemory(x []float32, y []int32, shape []int, classes int) (*InMemory, error) {
	size, err := checkSamples(len(x), y, shape, classes)
	if err != nil {
		return nil, err
	}
	return &InMemory{X: x, Y: y, shape: append([]int(nil), shape...), size: size, classes: classes}, nil
}

// Len is the number of samples.
func (d *InMemory) Len() int { return len(d.Y) }

// SampleShape is the shape of one sample. The caller must not modify it.
func (d *InMemory) SampleShape() []int { return d.shape }

// SampleSize is the number of values in one sample, the product of SampleShape.
func (d *InMemory) SampleSize() int { return d.size }

// Classes is the number of classes.
func (d *InMemory) Classes() int { return d.classes }

// Gather copies samples idx[i] into x[i*size:(i+1)*size] and their labels into
// y[i]; an index of -1 is padding (a zero row, label -1). It does not
// allocate. It panics when an index is out of range or x or y is too short:
// those are programming errors.
//
//	x is (len(idx), SampleSize()), y is (len(idx))
func (d *InMemory) Gather(idx []int, x []float32, y []int32) {
	gatherRows(idx, x, y, d.X, d.Y, d.size, func(dst, src []float32) { copy(dst, src) })
}

// Subset returns the first n samples as a dataset that shares memory with d,
// for short runs such as CI. n >= Len() returns d itself; n must be positive.
func (d *InMemory) Subset(n int) *InMemory {
	if n <= 0 {
		panic(fmt.Sprintf("datasets: Subset(%d): n must be positive", n))
	}
	if n >= d.Len() {
		return d
	}
	return d.slice(0, n)
}

// Split returns the first Len()-n samples and the last n as two datasets that
// share memory with d; 0 < n < Len().
func (d *InMemory) Split(n int) (head, tail *InMemory) {
	if n <= 0 || n >= d.Len() {
		panic(fmt.Sprintf("datasets: Split(%d) of %d samples: want 0 < n < %d", n, d.Len(), d.Len()))
	}
	cut := d.Len() - n
	return d.slice(0, cut), d.slice(cut, d.Len())
}

func (d *InMemory) slice(lo, hi int) *InMemory {
	return &InMemory{
		X:       d.X[lo*d.size : hi*d.size : hi*d.size],
		Y:       d.Y[lo:hi:hi],
		shape:   d.shape,
		size:    d.size,
		classes: d.classes,
	}
}

// Normalize standardises every value in place: x ← (x − mean) / std. Apply
// the same constants to the training and the test set, once. Datasets that
// share memory (Subset, Split) see the change.
func (d *InMemory) Normalize(mean, std float32) {
	if !(std > 0) || math.IsInf(float64(std), 0) {
		panic(fmt.Sprintf("datasets: Normalize with std %v: want a positive finite number", std))
	}
	inv := 1 / std
	for i, v := range d.X {
		d.X[i] = (v - mean) * inv
	}
}

// MeanStd returns the mean and the (population) standard deviation of all
// values of X, accumulated in float64 in index order.
func (d *InMemory) MeanStd() (mean, std float32) {
	var sum float64
	for _, v := range d.X {
		sum += float64(v)
	}
	m := sum / float64(len(d.X))
	var sq float64
	for _, v := range d.X {
		dv := float64(v) - m
		sq += dv * dv
	}
	return float32(m), float32(math.Sqrt(sq / float64(len(d.X))))
}

// ClassCounts returns how many samples carry each label.
func (d *InMemory) ClassCounts() []int {
	counts := make([]int, d.classes)
	for _, label := range d.Y {
		counts[label]++
	}
	return counts
}
