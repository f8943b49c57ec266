package cpu

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
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
		compute.PanicShapes("cpu", op, "dlogits must have the shape of logits", logits.Shape(), dlogits.Shape())
	}
	if len(lab) != rows {
		panic(fmt.Sprintf("cpu: %s: %d labels for logits of shape %v", op, len(lab), []int(logits.Shape())))
	}
	if len(st) != 3 {
		compute.PanicShape("cpu", op, "stats of 3 elements", stats.Shape())
	}
	if overlap(x, g) {
		compute.PanicShapes("cpu", op, "dlogits overlaps logits", logits.Shape(), dlogits.Shape())
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
			compute.PanicLabel("cpu", op, i, y, classes)
		}
		l, hit := hostloops.SoftmaxXentRow(xr, gr, y, scale)
		loss += l
		if hit {
			correct++
		}
		labelled++
	}
	st[0] += float32(loss)
	st[1] += float32(correct)
	st[2] += float32(labelled)
}
