// Package fold holds the fixed-order reduction loops that the CPU backends
// share (comm/shm, and comm/mpi's shared-memory step within a host): each
// element of a Sum is the float32 left fold ((x0 + x1) + x2) + ... over PEs
// 0, 1, ..., N-1, so every backend that uses it gives the same bits. The
// loops are unrolled eight wide over re-sliced windows so that the compiler
// drops the bounds checks. Every input is at least len(dst) long.
package fold

import "github.com/symddp/symddp/comm"

// Fold reduces ins (the PEs' copies of one chunk, in PE order) into acc:
// Sum and Mean as the float32 left fold (Mean is not divided here), Max and
// Min with Go's max and min (NaN wins, -0 < +0).
func Fold(acc []float32, ins [][]float32, op comm.Op) {
	switch op {
	case comm.Sum, comm.Mean:
		q := 1
		if len(ins) == 1 {
			copy(acc, ins[0])
		} else {
			sum2(acc, ins[0], ins[1])
			q = 2
		}
		for ; q+2 <= len(ins); q += 2 {
			acc2(acc, ins[q], ins[q+1])
		}
		if q < len(ins) {
			acc1(acc, ins[q])
		}
	case comm.Max:
		copy(acc, ins[0])
		for _, in := range ins[1:] {
			maxTo(acc, in)
		}
	case comm.Min:
		copy(acc, ins[0])
		for _, in := range ins[1:] {
			minTo(acc, in)
		}
	}
}

// Divide sets dst[i] /= d (Mean: one correctly rounded division).
func Divide(dst []float32, d float32) {
	for i := range dst {
		dst[i] /= d
	}
}

// sum2 sets dst[i] = a[i] + b[i].
func sum2(dst, a, b []float32) {
	n := len(dst)
	dst, a, b = dst[:n:n], a[:n:n], b[:n:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		d, x, y := dst[i:i+8:i+8], a[i:i+8:i+8], b[i:i+8:i+8]
		d[0] = x[0] + y[0]
		d[1] = x[1] + y[1]
		d[2] = x[2] + y[2]
		d[3] = x[3] + y[3]
		d[4] = x[4] + y[4]
		d[5] = x[5] + y[5]
		d[6] = x[6] + y[6]
		d[7] = x[7] + y[7]
	}
	for ; i < n; i++ {
		dst[i] = a[i] + b[i]
	}
}

// acc1 sets dst[i] += a[i].
func acc1(dst, a []float32) {
	n := len(dst)
	dst, a = dst[:n:n], a[:n:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		d, x := dst[i:i+8:i+8], a[i:i+8:i+8]
		d[0] += x[0]
		d[1] += x[1]
		d[2] += x[2]
		d[3] += x[3]
		d[4] += x[4]
		d[5] += x[5]
		d[6] += x[6]
		d[7] += x[7]
	}
	for ; i < n; i++ {
		dst[i] += a[i]
	}
}

// acc2 sets dst[i] = (dst[i] + a[i]) + b[i].
func acc2(dst, a, b []float32) {
	n := len(dst)
	dst, a, b = dst[:n:n], a[:n:n], b[:n:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		d, x, y := dst[i:i+8:i+8], a[i:i+8:i+8], b[i:i+8:i+8]
		d[0] = (d[0] + x[0]) + y[0]
		d[1] = (d[1] + x[1]) + y[1]
		d[2] = (d[2] + x[2]) + y[2]
		d[3] = (d[3] + x[3]) + y[3]
		d[4] = (d[4] + x[4]) + y[4]
		d[5] = (d[5] + x[5]) + y[5]
		d[6] = (d[6] + x[6]) + y[6]
		d[7] = (d[7] + x[7]) + y[7]
	}
	for ; i < n; i++ {
		dst[i] = (dst[i] + a[i]) + b[i]
	}
}

// maxTo sets dst[i] = max(dst[i], a[i]).
func maxTo(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = max(dst[i], a[i])
	}
}

// minTo sets dst[i] = min(dst[i], a[i]).
func minTo(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = min(dst[i], a[i])
	}
}
