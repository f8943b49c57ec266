package optim

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/internal/hostloops"
)

// Gradient clipping by global norm (Pascanu et al., 2013, "On the difficulty
// of training recurrent neural networks", arXiv:1211.5063), as
// torch.nn.utils.clip_grad_norm_ with the L2 norm. The split form serves
// device engines and a trainer that holds the gradients in pieces:
//
//	norm := GlobalNorm(grads)            // or sqrt(Σ Engine.SumSquares(piece))
//	if s, ok := ClipFactor(norm, maxNorm); ok {
//		Scale(grads, s)                  // or Engine.Scale(piece, s)
//	}

// ClipGlobalNorm scales grads, the whole flat gradient arena, in place so
// that their L2 norm is at most maxNorm, and returns the norm they had. It
// is GlobalNorm, then Scale by ClipFactor when that says to clip. A NaN or
// infinite norm means a non-finite gradient: the caller should stop (an
// infinite norm scales grads by 0; a NaN norm leaves them as they are).
func ClipGlobalNorm(grads []float32, maxNorm float32) (norm float64) {
	norm = GlobalNorm(grads)
	if s, ok := ClipFactor(norm, maxNorm); ok {
		Scale(grads, s)
	}
	return norm
}

// GlobalNorm returns the L2 norm of x, sqrt(SumSquares(x)).
func GlobalNorm(x []float32) float64 { return math.Sqrt(SumSquares(x)) }

// SumSquares returns Σ x[i]², accumulated in float64 in a fixed order. Each
// square is exact in float64. x is cut into four blocks, [0, q), [q, 2q),
// [2q, 3q) and [3q, n) with q = ⌊n/4⌋; lane k sums the squares of block k in
// increasing index, and the result is (lane0 + lane1) + (lane2 + lane3). The
// four blocks are four memory streams read together, which a single core
// reads much faster than one. A trainer that holds the gradients in shards
// adds the shards' SumSquares in a fixed order and takes the square root.
func SumSquares(x []float32) float64 {
	q := len(x) / 4
	a, b, c, d := x[:q], x[q:2*q], x[2*q:3*q], x[3*q:]
	b, c = b[:len(a)], c[:len(a)]
	dHead := d[:len(a)]
	var s0, s1, s2, s3 float64
	for i, v := range a {
		w, y, z := float64(b[i]), float64(c[i]), float64(dHead[i])
		s0 += float64(v) * float64(v)
		s1 += w * w
		s2 += y * y
		s3 += z * z
	}
	for _, v := range d[len(a):] {
		s3 += float64(v) * float64(v)
	}
	return (s0 + s1) + (s2 + s3)
}

// ClipFactor returns the factor that brings gradients of global norm norm
// down to maxNorm and true when norm > maxNorm: float32(maxNorm / (norm +
// 1e-6)), computed in float64. Otherwise, NaN norm included, it returns 1 and
// false and the gradients stay as they are. It panics unless maxNorm > 0.
func ClipFactor(norm float64, maxNorm float32) (scale float32, clip bool) {
	if !(maxNorm > 0) {
		panic(fmt.Sprintf("optim: clip: max norm %g, must be > 0", maxNorm))
	}
	if !(norm > float64(maxNorm)) {
		return 1, false
	}
	return float32(float64(maxNorm) / (norm + 1e-6)), true
}

// Scale multiplies every element of x by s, in float32.
func Scale(x []float32, s float32) {
	hostloops.Scale(x, s)
}
