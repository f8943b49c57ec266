package cpu

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
)

// SoftmaxCrossEntropy reads logits (B,C) and labels (B), writes
// dlogits (B,C) = (softmax(logits) - onehot(label)) * scale for labelled rows
// and zeros for padding rows (label -1), and adds to stats (3) the rows'
// summed loss, how many rows' arg-max (the first, on ties) is their label,
// and how many rows are labelled.
//
// It is stable for any finite logits: each row is shifted by its maximum, so
// exp never overflows, and the loss is log-sum-exp minus the label's logit.
func (e *Engine) SoftmaxCrossEntropy(logits compute.Tensor, labels compute.Labels, dlogits compute.Tensor, scale float32, stats compute.Tensor) {
	const op = "SoftmaxCrossEntropy"
	x, rows, classes := matrix(op, logits)
	g, grows, _ := matrix(op, dlogits)
	lab := labelData(op, labels)
	st := data(op, stats)
	if len(g) != len(x) || grows != rows {
		panicShapes(op, "dlogits must have the shape of logits", logits.Shape(), dlogits.Shape())
	}
	if len(lab) != rows {
		panic(fmt.Sprintf("cpu: %s: %d labels for logits of shape %v", op, len(lab), []int(logits.Shape())))
	}
	if len(st) != 3 {
		panicShape(op, "stats of 3 elements", stats.Shape())
	}
	if overlap(x, g) {
		panicShapes(op, "dlogits overlaps logits", logits.Shape(), dlogits.Shape())
	}
	var loss float64
	var correct, labelled int
	for i := 0; i < rows; i++ {
		xr := x[i*classes : i*classes+classes]
		gr := g[i*classes : i*classes+classes]
		gr = gr[:len(xr)]
		y := int(lab[i])
		if y == -1 {
			clear(gr)
			continue
		}
		if y < 0 || y >= classes {
			panicLabel(op, i, y, classes)
		}
		// The arg-max (first on ties) and the maximum.
		best := 0
		for j, v := range xr {
			if v > xr[best] {
				best = j
			}
		}
		m := float64(xr[best])
		// exp(x - max), each <= 1, into the gradient row; summed in float64.
		var sum float64
		for j, v := range xr {
			p := math.Exp(float64(v) - m)
			gr[j] = float32(p)
			sum += p
		}
		loss += math.Log(sum) - (float64(xr[y]) - m)
		inv := float64(scale) / sum
		for j, p := range gr {
			gr[j] = float32(float64(p) * inv)
		}
		gr[y] -= scale
		if best == y {
			correct++
		}
		labelled++
	}
	st[0] += float32(loss)
	st[1] += float32(correct)
	st[2] += float32(labelled)
}

//go:noinline
func panicLabel(op string, row, label, classes int) {
	panic(fmt.Sprintf("cpu: %s: row %d has label %d, want -1 or 0..%d", op, row, label, classes-1))
}
