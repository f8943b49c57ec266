package models

import "github.com/symddp/symddp/compute"

// CrossEntropy is the softmax cross-entropy loss of a classifier on an
// engine: it owns the logits' gradient and running totals of the loss, the
// correct predictions and the labelled rows. The arithmetic is the engine's
// SoftmaxCrossEntropy (stable for any finite logits; rows labelled -1 are
// padding and count for nothing).
type CrossEntropy struct {
	e       compute.Engine
	dlogits compute.Tensor // (B,Classes)
	stats   compute.Tensor // (3): loss sum, correct, labelled
	host    [3]float32
}

// NewCrossEntropy allocates the loss for batch rows of classes logits.
func NewCrossEntropy(e compute.Engine, batch, classes int) *CrossEntropy {
	return &CrossEntropy{e: e, dlogits: e.Alloc(batch, classes), stats: e.Alloc(3)}
}

// Apply adds the batch's loss and accuracy to the totals and returns
// dlogits (B,Classes) = (softmax(logits) - onehot(labels)) * scale, the
// gradient of scale times the summed loss. The trainer passes
// scale = 1 / (labelled rows in the global batch) to get the mean. dlogits
// belongs to the loss and is overwritten by the next Apply.
func (c *CrossEntropy) Apply(logits compute.Tensor, labels compute.Labels, scale float32) compute.Tensor {
	c.e.SoftmaxCrossEntropy(logits, labels, c.dlogits, scale, c.stats)
	return c.dlogits
}

// Totals returns the sums since the last Reset: the loss over labelled rows
// (unscaled), how many were predicted right and how many there were. On a
// device engine it synchronises.
func (c *CrossEntropy) Totals() (loss float64, correct, labelled int) {
	c.e.ReadTensor(c.host[:], c.stats)
	return float64(c.host[0]), int(c.host[1]), int(c.host[2])
}

// Stats is the (3) tensor behind Totals, for a trainer that sums it across
// PEs on the engine.
func (c *CrossEntropy) Stats() compute.Tensor { return c.stats }

// Reset sets the totals to zero.
func (c *CrossEntropy) Reset() { c.e.Zero(c.stats) }
