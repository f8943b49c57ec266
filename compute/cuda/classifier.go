package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

// crossEntropyBF16 is the fused classifier (compute.CrossEntropies): per
// row the softmax cross-entropy of the bf16 logits, whose gradient (times
// the scale) overwrites them in the same kernel (sdc_softmax_xent with
// SDC_BF16), so no fp32 copy of the logits exists; then the rows' losses
// and the labelled rows are summed into the stats (its second kernel). The
// scale goes into the
// kernel by value: a captured graph holds it (Graph.Launch refuses
// another, see captureState.frozen).
type crossEntropyBF16 struct {
	e             *Engine
	rows, classes int
	losses        *Tensor // (rows) fp32: each row's loss
}

// CrossEntropy plans s (DType BF16; the fp32 loss is
// Engine.SoftmaxCrossEntropy).
func (e *Engine) CrossEntropy(s compute.CrossEntropySpec) (compute.CrossEntropyPlan, error) {
	if s.DType != compute.BF16 {
		return nil, &compute.MissingOpError{Engine: e.Name(), Op: fmt.Sprintf("%v cross-entropy plan (Engine.SoftmaxCrossEntropy is the fp32 one)", s.DType), Group: "CrossEntropies"}
	}
	if err := e.CheckBF16(s); err != nil {
		return nil, err
	}
	if _, err := e.bf16(); err != nil {
		return nil, err
	}
	return &crossEntropyBF16{e: e, rows: s.Rows, classes: s.Classes, losses: e.Alloc(s.Rows).(*Tensor)}, nil
}

// Path says what runs.
func (c *crossEntropyBF16) Path() string {
	return "fused classifier (the logits' gradient overwrites them)"
}

// Apply computes the loss of logits (rows, classes) against labels into
// stats and overwrites logits with their gradient times scale.
func (c *crossEntropyBF16) Apply(logits compute.Tensor, labels compute.Labels, scale float32, stats compute.Tensor) compute.Tensor {
	const op = "bf16 CrossEntropy"
	e := c.e
	ld, st := e.bf16Of(op, logits), e.tensorOf(op, stats)
	if ld.size != c.rows*c.classes {
		compute.PanicShape("cuda", op, fmt.Sprintf("(%d,%d) logits", c.rows, c.classes), ld.shape)
	}
	if st.size != 3 {
		compute.PanicShape("cuda", op, "stats of 3 elements", st.shape)
	}
	tgt := e.checkIDs(op, labels, c.rows, -1, int32(c.classes))
	if e.capture.active {
		e.capture.lossScale(scale)
		e.capture.frozen = true
	}
	e.fail(op, e.dev.SoftmaxXent(cudalib.BFloat16, ld.ptr, tgt.ptr, c.rows, c.classes, c.classes, ld.ptr, scale, false, st.ptr, c.losses.ptr))
	return logits
}
