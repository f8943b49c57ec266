// Package models holds symddp's layers, ready models and the registry that
// lets `train --model NAME` and models.New find built-in and user models.
//
// # Models and arenas
//
// A [Model] is a classifier from a batch of samples (B, In...) to logits
// (B, Classes). It declares its parameters up front ([ParamSpec]: a name, a
// shape and an initialisation). The caller, usually ddp.Trainer, lays them
// out back to back in two flat arenas, one for weights and one for
// gradients ([Layout]), fills the weights ([InitParams]) and hands the model
// tensor views into both in [Model.Build]; the model never allocates
// parameter memory of its own. Forward and backward run on a
// compute.Engine, so the same model code trains on the CPU and on the GPU.
//
// # Layers and composition
//
// Most models are a [Sequential] of [Layer] values, each a forward and
// backward pair with its own parameters: [Linear] (with a fused ReLU),
// [ReLU], and layers of your own. [MLP] is the model registered as "mlp".
// The softmax cross-entropy loss, [CrossEntropy], is kept apart from the
// model: the trainer applies it to the logits.
//
// # Writing a layer
//
// A Layer implements four methods:
//
//   - Params declares its parameters, in the order they take in the arenas.
//   - Build receives the engine, the micro-batch size, the shape of one
//     input sample and views of its parameters and gradients; it keeps the
//     views, allocates its activations and returns the shape of one output
//     sample. Build is the only place that allocates.
//   - Forward computes the output from x (B, In...) and keeps what Backward
//     needs.
//   - Backward takes the gradient at the output, overwrites the layer's
//     gradient views with the gradients of its parameters, and returns the
//     gradient at the input, or nil when Build said NeedInputGrad is false
//     (the first layer).
//
// A layer written with the Engine's operations alone (Gemm, BiasAct,
// BiasActBackward, Copy, ...) runs on every engine; one that loops over
// memory itself uses compute.HostData and runs on the CPU engine only.
// Check a new layer's gradients with finite differences, as this package's
// tests do for Linear and ReLU and examples/convnet does for a convolution
// and a pooling layer.
//
// # The registry
//
// [Register] maps a name to a [Factory] that builds a model from a [Config]
// (the data's shapes and the command line's model settings), normally from
// an init function; [New] builds a registered model and [Names] lists them.
package models

import "github.com/symddp/symddp/compute"

// Init is how a parameter is initialised.
type Init uint8

// Initialisations. He suits weights followed by ReLU, Xavier (Glorot) the
// others; FanIn and FanOut come from the ParamSpec.
const (
	Zeros Init = iota
	HeNormal
	HeUniform
	XavierUniform
	XavierNormal
)

// ParamSpec declares one parameter tensor.
type ParamSpec struct {
	// Name is unique within the model ("fc1.weight"); checkpoints use it.
	Name string
	// Shape is the tensor's shape, row-major.
	Shape []int
	// Init and the fans that scale it.
	Init          Init
	FanIn, FanOut int // as torch.nn.init computes them (a Linear layer: In and Out)
}

// Size is the number of elements of the parameter.
func (p ParamSpec) Size() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Build is what a model or layer gets when it is built for a batch size.
type Build struct {
	// Engine runs the layer's operations and allocates its activations.
	Engine compute.Engine
	// Batch is the number of rows of every forward (this PE's micro-batch).
	Batch int
	// Params and Grads are views of this layer's (or model's) parameters and
	// their gradients, in the order of Params().
	Params, Grads []compute.Tensor
	// In is the shape of one input sample (without the batch dimension).
	In []int
	// NeedInputGrad is false for the first layer: its Backward may then
	// skip computing the gradient with respect to its input and return nil.
	NeedInputGrad bool
}

// Layer is one forward/backward pair. Layers keep their activations in
// tensors allocated by Build and must not allocate in Forward or Backward.
type Layer interface {
	// Params declares the layer's parameters (none for ReLU).
	Params() []ParamSpec
	// Build binds parameter views, allocates activations, and returns the
	// shape of one output sample.
	Build(b Build) (out []int, err error)
	// Forward computes the layer's output for x (Batch, In...).
	Forward(x compute.Tensor) compute.Tensor
	// Backward takes the gradient at the output, writes the gradients of the
	// layer's parameters into the Grads views (overwriting them), and returns
	// the gradient at the input (nil when NeedInputGrad was false). It may
	// overwrite dy, and may return dy itself as the input gradient.
	Backward(dy compute.Tensor) compute.Tensor
}

// Model is what the trainer trains: a classifier from (Batch, In...) inputs
// to (Batch, Classes) logits.
type Model interface {
	// Name is the registry name or a user's label.
	Name() string
	// Params declares every parameter in arena order.
	Params() []ParamSpec
	// InputShape is the shape of one sample.
	InputShape() []int
	// Classes is the number of logits.
	Classes() int
	// Build binds the parameter and gradient views (in Params order) and
	// allocates activations for batch rows.
	Build(e compute.Engine, params, grads []compute.Tensor, batch int) error
	// Forward returns the logits (Batch, Classes).
	Forward(x compute.Tensor) compute.Tensor
	// Backward propagates the gradient of the loss with respect to the
	// logits. Parameters finish in reverse arena order; after parameter i and
	// all later ones have their final gradients it calls ready(i), so that
	// the trainer can start reducing that part of the gradient arena while
	// backward goes on. ready may be nil. Backward may overwrite dlogits.
	Backward(dlogits compute.Tensor, ready func(firstParam int))
}
