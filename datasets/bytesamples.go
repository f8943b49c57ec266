package datasets

import (
	"fmt"
	"math"
	"runtime"
)

// ByteSamples is a Dataset whose values are stored as bytes, the way IDX
// files hold pixels, and turned into float32 by a 256-entry table while
// Gather copies them out. It takes a quarter of the memory of InMemory, and
// its bytes may be a read-only memory mapping of a raw IDX file, shared by
// every process of the host that maps the same file (LoadBytes).
//
// The table starts as b/255 (the values InMemory holds after Load);
// Normalize folds the standardisation into it, so Gather returns the same
// float32 bits as InMemory after Load and Normalize with the same constants.
type ByteSamples struct {
	// X holds Len() rows of SampleSize() bytes, row-major: (N, D). It may
	// be read-only memory: do not write to it.
	X []byte
	// Y holds the Len() labels, each in [0, Classes()).
	Y []int32

	table   *[256]float32 // value of byte b, shared with Subset and Split
	shape   []int
	size    int
	classes int
	m       *mapping // the mapping X lives in; nil for Go memory
}

var _ Dataset = (*ByteSamples)(nil)

// NewByteSamples wraps x (N rows of product(shape) bytes) and y (N labels in
// [0, classes)) without copying them; byte b stands for the value b/255 until
// Normalize. It checks the sizes and the labels.
func NewByteSamples(x []byte, y []int32, shape []int, classes int) (*ByteSamples, error) {
	size, err := checkSamples(len(x), y, shape, classes)
	if err != nil {
		return nil, err
	}
	return &ByteSamples{X: x, Y: y, table: pixelScale(), shape: append([]int(nil), shape...), size: size, classes: classes}, nil
}

// checkSamples validates the arguments of NewInMemory and NewByteSamples
// (values holds the number of values of x) and returns the sample size.
func checkSamples(values int, y []int32, shape []int, classes int) (int, error) {
	size := 1
	for _, d := range shape {
		if d <= 0 {
			return 0, fmt.Errorf("sample shape %v: dimensions must be positive", shape)
		}
		size *= d
	}
	switch {
	case len(shape) == 0:
		return 0, fmt.Errorf("sample shape is empty")
	case classes <= 0:
		return 0, fmt.Errorf("%d classes: need at least one", classes)
	case len(y) == 0:
		return 0, fmt.Errorf("empty dataset: no samples")
	case values != len(y)*size:
		return 0, fmt.Errorf("%d values for %d samples of shape %v: want %d", values, len(y), shape, len(y)*size)
	}
	for i, label := range y {
		if label < 0 || int(label) >= classes {
			return 0, fmt.Errorf("label %d of sample %d is outside [0, %d)", label, i, classes)
		}
	}
	return size, nil
}

// gatherRows is the Gather of InMemory and ByteSamples, whose sample j is the
// row xs[j*size:(j+1)*size] and the label ys[j]: it checks that x and y hold
// len(idx) samples, writes a zero row and label -1 for an index of -1, and
// otherwise the label and the row, which decode turns into float32 values.
func gatherRows[T float32 | byte](idx []int, x []float32, y []int32, xs []T, ys []int32, size int, decode func(dst []float32, src []T)) {
	if len(x) < len(idx)*size || len(y) < len(idx) {
		panic(fmt.Sprintf("datasets: Gather of %d samples of %d values into x of %d and y of %d",
			len(idx), size, len(x), len(y)))
	}
	for i, j := range idx {
		row := x[i*size : (i+1)*size]
		switch {
		case j == -1:
			clear(row)
			y[i] = -1
		case j < 0 || j >= len(ys):
			panic(fmt.Sprintf("datasets: Gather index %d outside [0, %d)", j, len(ys)))
		default:
			decode(row, xs[j*size:(j+1)*size])
			y[i] = ys[j]
		}
	}
}

// Len is the number of samples.
func (d *ByteSamples) Len() int { return len(d.Y) }

// SampleShape is the shape of one sample. The caller must not modify it.
func (d *ByteSamples) SampleShape() []int { return d.shape }

// SampleSize is the number of values in one sample, the product of SampleShape.
func (d *ByteSamples) SampleSize() int { return d.size }

// Classes is the number of classes.
func (d *ByteSamples) Classes() int { return d.classes }

// Mapped reports whether X is a memory mapping of a file (shared with the
// other processes that map it) rather than Go memory.
func (d *ByteSamples) Mapped() bool { return d.m != nil }

// Value returns the float32 that byte b stands for in Gather.
func (d *ByteSamples) Value(b byte) float32 { return d.table[b] }

// Gather writes samples idx[i], decoded to float32, into
// x[i*size:(i+1)*size] and their labels into y[i]; an index of -1 is padding
// (a zero row, label -1). It does not allocate. It panics when an index is out
// of range or x or y is too short: those are programming errors.
//
//	x is (len(idx), SampleSize()), y is (len(idx))
func (d *ByteSamples) Gather(idx []int, x []float32, y []int32) {
	d.touch(idx)
	t := d.table
	gatherRows(idx, x, y, d.X, d.Y, d.size, func(dst []float32, src []byte) { decodeRow(dst, src, t) })
}

// touch loads one byte of every cache line of the rows idx names before
// they are decoded. The loads are independent, so the processor overlaps
// their cache and TLB misses; the decoding loop alone would wait for them row
// by row (twice as slow for random rows of a dataset larger than the caches).
func (d *ByteSamples) touch(idx []int) {
	var s byte
	for _, j := range idx {
		if j < 0 || j >= len(d.Y) {
			continue // padding; Gather reports bad indices
		}
		row := d.X[j*d.size : (j+1)*d.size]
		for k := 0; k < len(row); k += 64 {
			s += row[k]
		}
		s += row[len(row)-1]
	}
	runtime.KeepAlive(s)
}

// decodeRow sets dst[k] = t[src[k]]; len(src) == len(dst). (Unrolled
// variants, also loading eight bytes at a time, measured no faster.)
func decodeRow(dst []float32, src []byte, t *[256]float32) {
	src = src[:len(dst)]
	for k, b := range src {
		dst[k] = t[b]
	}
}

// Normalize standardises every value: v ← (v − mean) / std, computed once per
// byte value in the table, in the same float32 operations as
// InMemory.Normalize. Apply the same constants to the training and the test
// set, once. Datasets that share the table (Subset, Split) see the change.
func (d *ByteSamples) Normalize(mean, std float32) {
	if !(std > 0) || math.IsInf(float64(std), 0) {
		panic(fmt.Sprintf("datasets: Normalize with std %v: want a positive finite number", std))
	}
	inv := 1 / std
	for b, v := range d.table {
		d.table[b] = (v - mean) * inv
	}
}

// SetValues replaces the table that maps bytes to values (value[b] for byte
// b) for d and every dataset sharing it (Subset, Split). Tests use it to
// inject faults; Normalize covers standardisation.
func (d *ByteSamples) SetValues(value [256]float32) { *d.table = value }

// Subset returns the first n samples as a dataset that shares memory and the
// table with d. n >= Len() returns d itself; n must be positive.
func (d *ByteSamples) Subset(n int) *ByteSamples {
	if n <= 0 {
		panic(fmt.Sprintf("datasets: Subset(%d): n must be positive", n))
	}
	if n >= d.Len() {
		return d
	}
	return d.slice(0, n)
}

// Split returns the first Len()-n samples and the last n as two datasets
// that share memory and the table with d; 0 < n < Len().
func (d *ByteSamples) Split(n int) (head, tail *ByteSamples) {
	if n <= 0 || n >= d.Len() {
		panic(fmt.Sprintf("datasets: Split(%d) of %d samples: want 0 < n < %d", n, d.Len(), d.Len()))
	}
	cut := d.Len() - n
	return d.slice(0, cut), d.slice(cut, d.Len())
}

func (d *ByteSamples) slice(lo, hi int) *ByteSamples {
	s := *d
	s.X = d.X[lo*d.size : hi*d.size : hi*d.size]
	s.Y = d.Y[lo:hi:hi]
	return &s
}

// Float32 returns a copy of d as an InMemory holding the decoded values.
func (d *ByteSamples) Float32() *InMemory {
	x := make([]float32, len(d.X))
	for i, b := range d.X {
		x[i] = d.table[b]
	}
	return &InMemory{X: x, Y: append([]int32(nil), d.Y...), shape: d.shape, size: d.size, classes: d.classes}
}

// ClassCounts returns how many samples carry each label.
func (d *ByteSamples) ClassCounts() []int {
	counts := make([]int, d.classes)
	for _, label := range d.Y {
		counts[label]++
	}
	return counts
}

// Close releases the memory mapping that X lives in, if any. After Close, d
// and every dataset made from it by Subset or Split must not be used. Close
// of a dataset in Go memory does nothing; a second Close does nothing.
func (d *ByteSamples) Close() error {
	if d.m == nil {
		return nil
	}
	return d.m.close()
}
