// Package kernels holds the host loops that the CPU engine (compute/cpu)
// runs and that the CUDA engine's emulated device (compute/cuda/cudatest)
// runs as reference kernels, so that both do the same float
// operations in the same order. They work on slices, check nothing and
// allocate nothing. (The element-wise loops both run are internal/vec's.)
package kernels

import "math"

// SumSquares returns the sum of the squares of x's elements, accumulated in
// float64 in index order.
func SumSquares(x []float32) float64 {
	var sum float64
	for _, v := range x {
		sum += float64(v) * float64(v)
	}
	return sum
}

// SoftmaxXentRow writes g = (softmax(x) - onehot(y)) * scale for one row of
// logits x with label y (0 <= y < len(x); g has at least len(x) elements),
// and returns the row's loss and whether its arg-max (the first, on ties)
// is y. The row is shifted by its maximum, so exp never overflows; exp and
// the sum are in float64, and the loss is log-sum-exp minus the label's
// logit.
func SoftmaxXentRow(x, g []float32, y int, scale float32) (loss float64, hit bool) {
	g = g[:len(x)]
	// The arg-max (first on ties) and the maximum.
	best := 0
	for j, v := range x {
		if v > x[best] {
			best = j
		}
	}
	m := float64(x[best])
	// exp(x - max), each <= 1, into the gradient row; summed in float64.
	var sum float64
	for j, v := range x {
		p := math.Exp(float64(v) - m)
		g[j] = float32(p)
		sum += p
	}
	loss = math.Log(sum) - (float64(x[y]) - m)
	inv := float64(scale) / sum
	for j, p := range g {
		g[j] = float32(float64(p) * inv)
	}
	g[y] -= scale
	return loss, best == y
}
