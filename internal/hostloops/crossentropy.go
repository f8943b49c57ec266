package hostloops

import "math"

// The classifier's loss: softmax cross-entropy over one row of logits, in
// float64 where it sums; its exponentials in C where the processor has
// AVX2 and FMA (xent.c), with the Go loop's bits.

// SoftmaxXentRow writes g = (softmax(x) - onehot(y)) * scale for one row of
// logits x with label y (0 <= y < len(x); g has at least len(x) elements),
// and returns the row's loss and whether its arg-max (the first, on ties)
// is y. The row is shifted by its maximum, so exp never overflows; exp and
// the sum are in float64, and the loss is log-sum-exp minus the label's
// logit.
//
// With the C loops on a processor with AVX2 and FMA, the exponentials run
// four at a time (xent.c) with the bits of this loop's math.Exp.
func SoftmaxXentRow(x, g []float32, y int, scale float32) (loss float64, hit bool) {
	g = g[:len(x)]
	if useC && len(x) > 0 {
		_ = x[y]
		if best, m, sum, ok := cXentRow(x, g, scale); ok {
			g[y] -= scale
			return math.Log(sum) - (float64(x[y]) - m), best == y
		}
	}
	return goSoftmaxXentRow(x, g, y, scale)
}

// goSoftmaxXentRow is SoftmaxXentRow in Go: the reference of the C path,
// and what runs without it.
func goSoftmaxXentRow(x, g []float32, y int, scale float32) (loss float64, hit bool) {
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
