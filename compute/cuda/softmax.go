package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

// SoftmaxCrossEntropy reads logits (B,C) and labels (B), writes
// dlogits (B,C) = (softmax(logits) - onehot(label)) * scale for labelled rows
// and zeros for padding rows (label -1), and adds to stats (3) the rows'
// summed loss, how many rows' arg-max (the first, on ties) is their label,
// and how many rows are labelled. One kernel, a warp per row, exp and sums
// in double, statistics reduced in a fixed order.
//
// Labels are checked on the host against what SetLabels last wrote. While a
// graph is being captured, the kernel reads scale from the step block, so
// that each launch of the graph brings its own (Graph.Launch).
func (e *Engine) SoftmaxCrossEntropy(logits compute.Tensor, labels compute.Labels, dlogits compute.Tensor, scale float32, stats compute.Tensor) {
	const op = "SoftmaxCrossEntropy"
	x, rows, classes := e.matrix(op, logits)
	g, grows, _ := e.matrix(op, dlogits)
	lab := e.labelsOf(op, labels)
	st := e.tensorOf(op, stats)
	if g.size != x.size || grows != rows {
		compute.PanicShapes("cuda", op, "dlogits must have the shape of logits", x.shape, g.shape)
	}
	if len(lab.host) != rows {
		panic(fmt.Sprintf("cuda: %s: %d labels for logits of shape %v", op, len(lab.host), []int(x.shape)))
	}
	if st.size != 3 {
		compute.PanicShape("cuda", op, "stats of 3 elements", st.shape)
	}
	if overlap(x, g) {
		compute.PanicShapes("cuda", op, "dlogits overlaps logits", x.shape, g.shape)
	}
	for i, y := range lab.host {
		if y != -1 && (y < 0 || int(y) >= classes) {
			compute.PanicLabel("cuda", op, i, int(y), classes)
		}
	}
	block := false
	if e.capture.active {
		block = true
		e.capture.lossScale(scale)
	}
	e.fail(op, e.dev.SoftmaxXent(cudalib.Float32, x.ptr, lab.ptr, rows, classes, classes, g.ptr, scale, block, st.ptr, 0))
}
