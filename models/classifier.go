package models

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
)

// Classifier is a Network trained with the softmax cross-entropy of its
// logits against one label per sample: the Model that NewClassifier makes.
type Classifier struct {
	net     Network
	e       compute.Engine
	dlogits compute.Tensor // (Rows,Classes)
}

var _ Model = (*Classifier)(nil)

// NewClassifier returns net as a Model: Forward runs net and the engine's
// SoftmaxCrossEntropy on its logits, Backward propagates the loss's
// gradient through net. It panics when net is nil.
func NewClassifier(net Network) *Classifier {
	if net == nil {
		panic("models.NewClassifier: nil network")
	}
	return &Classifier{net: net}
}

// Network is the classifier's network.
func (c *Classifier) Network() Network { return c.net }

// Name is the network's name.
func (c *Classifier) Name() string { return c.net.Name() }

// Params are the network's parameters.
func (c *Classifier) Params() []ParamSpec { return c.net.Params() }

// Data is float inputs of the network's input shape, one label per sample
// of the network's classes.
func (c *Classifier) Data() datasets.Spec {
	return datasets.Spec{Input: c.net.InputShape(), Targets: 1, Classes: c.net.Classes()}
}

// Build builds the network and allocates the logits' gradient.
func (c *Classifier) Build(e compute.Engine, params, grads []compute.Tensor, rows int) error {
	if err := c.net.Build(e, params, grads, rows); err != nil {
		return err
	}
	if rows <= 0 {
		return fmt.Errorf("build model %s: %d rows", c.net.Name(), rows)
	}
	c.e = e
	c.dlogits = e.Alloc(rows, c.net.Classes())
	return nil
}

// Forward runs the network on in.X and the cross-entropy against
// in.Targets (one per row, -1 for padding).
func (c *Classifier) Forward(in Inputs, scale float32, stats compute.Tensor) {
	logits := c.net.Forward(in.X)
	c.e.SoftmaxCrossEntropy(logits, in.Targets, c.dlogits, scale, stats)
}

// Backward propagates the loss's gradient through the network.
func (c *Classifier) Backward(ready func(firstParam int)) {
	c.net.Backward(c.dlogits, ready)
}
