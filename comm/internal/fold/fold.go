// Package fold holds the fixed-order reduction loops that the CPU backends
// share (comm/shm, and comm/mpi's shared-memory step within a host): each
// element of a Sum is the float32 left fold ((x0 + x1) + x2) + ... over PEs
// 0, 1, ..., N-1, so every backend that uses it gives the same bits. The
// sums run internal/hostloops' loops. Every input is at least len(dst) long.
package fold

import (
	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/hostloops"
)

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
			hostloops.Sum2(acc, ins[0], ins[1])
			q = 2
		}
		for ; q+2 <= len(ins); q += 2 {
			hostloops.Acc2(acc, ins[q], ins[q+1])
		}
		if q < len(ins) {
			hostloops.Acc1(acc, ins[q])
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
