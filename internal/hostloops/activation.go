package hostloops

import "math"

// The dense layers' bias and ReLU passes and the bias gradient. The C
// loops are in activation.h.

// ReLUMask sets d[i] = +0 where y[i] <= 0 (±0 and negatives, not NaN) and
// leaves d[i] elsewhere: the gradient through a ReLU whose output is y.
func ReLUMask(d, y []float32) {
	n := len(d)
	atLeast("ReLUMask", n, len(y))
	if !useC || n < minC {
		goReLUMask(d, y[:n])
		return
	}
	cReLUMask(d, y)
}

// BiasAct sets each of the rows of y (rows × n, row-major) to
// y + bias (bias nil: no bias) and then, with relu, to max(·, 0) (Go's max:
// NaN stays NaN, -0 becomes +0).
func BiasAct(y, bias []float32, rows, n int, relu bool) {
	atLeast("BiasAct", rows*n, len(y))
	if bias != nil {
		atLeast("BiasAct", n, len(bias))
	}
	if !useC || rows*n < minC {
		goBiasAct(y, bias, rows, n, relu)
		return
	}
	cBiasAct(y, bias, rows, n, relu)
}

// ColSums adds the column sums of d (rows × n, row-major) to s (n), row by
// row in order: s[j] += d[0][j], then d[1][j], and so on.
func ColSums(s, d []float32, rows, n int) {
	atLeast("ColSums", rows*n, len(d))
	atLeast("ColSums", n, len(s))
	if !useC || rows*n < minC {
		goColSums(s, d, rows, n)
		return
	}
	cColSums(s, d, rows, n)
}

// The Go loops: the reference for the C ones, and what runs without cgo.

// goReLUMask works without branches: where y is half zeros in no pattern, a
// branch is mispredicted every other element, which made this loop 3x
// slower. y <= 0 holds exactly when y is ±0 or negative and not NaN: with a
// = |bits(y)|, keep = (a != 0 && sign == 0) || a > bits(+Inf).
func goReLUMask(dd, yd []float32) {
	yd = yd[:len(dd)]
	for i, v := range yd {
		ub := math.Float32bits(v)
		a := int64(ub & 0x7fffffff)
		nonZero := uint32((a-1)>>63) + 1      // a-1 < 0 only for a == 0
		nan := uint32((0x7f800000-a)>>63) & 1 // a > bits(+Inf)
		keep := nonZero&(ub>>31^1) | nan
		dd[i] = math.Float32frombits(math.Float32bits(dd[i]) & -keep)
	}
}

func goBiasAct(y, bias []float32, rows, n int, relu bool) {
	for i := 0; i < rows; i++ {
		row := y[i*n : i*n+n]
		switch {
		case bias != nil && relu:
			bd := bias[:len(row)]
			for j, v := range row {
				row[j] = max(v+bd[j], 0)
			}
		case bias != nil:
			bd := bias[:len(row)]
			for j := range row {
				row[j] += bd[j]
			}
		case relu:
			for j, v := range row {
				row[j] = max(v, 0)
			}
		}
	}
}

func goColSums(s, d []float32, rows, n int) {
	s = s[:n]
	for i := 0; i < rows; i++ {
		row := d[i*n : i*n+n]
		for j, v := range row {
			s[j] += v
		}
	}
}
