// Package models holds symddp's layers, ready models and the registry that
// lets `train --model NAME` and models.New find built-in and user models.
//
// # Models and arenas
//
// A [Model] maps a typed batch ([Inputs]: float inputs or token ids, and
// targets, one per sample or one per position, -1 ignored) to a loss and
// the metrics it declares. It declares its parameters up front ([ParamSpec]:
// a name, a shape and an initialisation). The caller, usually ddp.Trainer,
// lays them out back to back in two flat arenas, one for weights and one for
// gradients ([Layout]), fills the weights ([InitParams]) and hands the model
// tensor views into both in [Model.Build]; the model never allocates
// parameter memory of its own. Forward and backward run on a
// compute.Engine, so the same model code trains on the CPU and on the GPU.
//
// A classifier is a [Network] (from (B, In...) inputs to (B, Classes)
// logits) wrapped by [NewClassifier], which adds the softmax cross-entropy
// ([CrossEntropy]); [MLP] is the network registered as "mlp".
//
// # Layers and composition
//
// Most networks are a [Sequential] of [Layer] values, each a forward and
// backward pair with its own parameters: [Linear] (with a fused ReLU),
// [ReLU], [Residual] (x + f(x) around layers of its own), and layers of
// your own. Composition is a tree: a Residual holds layers, which may hold
// layers. Two layers share a parameter when one declares it with
// ParamSpec.TiedTo naming the other's: it is stored once in the arena and
// its gradient is the sum of both uses ([Build.AddGrads]).
//
// # Language models
//
// A decoder-only language model is a [Decoder] made of a [DecoderSpec]:
// the sizes, the names and initialisation of the token embedding, the
// learned positions (or none), the final norm and the head (tied to the
// embedding or not), and a function that composes each layer's blocks
// from layers. The Decoder embeds, runs the blocks, the norm, the head and
// the next-token cross-entropy, reports gradients ready block by block,
// recomputes, samples and counts its FLOPs. [GPT] and [Llama] are a spec
// each ([GPTConfig.DecoderSpec], [LlamaConfig.DecoderSpec]); a model of
// one's own is another.
//
// # Recomputing activations
//
// A [Checkpoint] holds layers whose activations are recomputed in
// backward instead of kept from forward: it keeps its input and output,
// its layers allocate from a [ScratchPool] that every checkpoint of the
// pool shares, and its Backward runs their Forward again before their
// Backward. L checkpointed blocks then hold one block's activations plus
// L outputs, for about one more forward a step; the gradients are the
// same bits. A Decoder (GPT and Llama among them) takes it as
// Config.Recompute ([Recompute], [Decoder.SetRecompute]).
//
// # Writing a layer
//
// A Layer implements four methods:
//
//   - Params declares its parameters, in the order they take in the arenas.
//   - Build receives the engine, the micro-batch size, the shape of one
//     input sample and views of its parameters and gradients; it keeps the
//     views, allocates its activations (with Build.Alloc, and plans that
//     hold activations with SharedPlan, so that they share memory inside a
//     [Checkpoint]) and returns the shape of one output sample. Build is
//     the only place that allocates. A layer that needs an
//     operation group (compute.Norms, compute.Attention, ...) asks for it
//     here with compute.Require, so that an engine without it fails the
//     build with one line.
//   - Forward computes the output from x (B, In...) and keeps what Backward
//     needs.
//   - Backward takes the gradient at the output, overwrites the layer's
//     gradient views with the gradients of its parameters (adds to those
//     that Build.AddGrads marks), and returns the gradient at the input, or
//     nil when Build said NeedInputGrad is false (the first layer).
//
// A layer written with the Engine's operations alone (Gemm, BiasAct,
// BiasActBackward, Copy, ...) runs on every engine; one that loops over
// memory itself uses compute.HostData and runs on the CPU engine only.
// Check a new layer with layertest.Check (package models/layertest): its
// gradients against finite differences, and the promises above, as this
// package's tests do for its layers and examples/convnet does for a
// convolution and a pooling layer.
//
// # The registry
//
// [Register] maps a name to a [Factory] that builds a model from a [Config]
// (the data's shapes and the command line's model settings), normally from
// an init function; [New] builds a registered model and [Names] lists them.
package models

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
)

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
	Normal // N(0, Std²), Std from the ParamSpec (GPT-2's 0.02)
	Ones   // every element 1 (a norm's gain)
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
	// Std is the standard deviation of Normal.
	Std float64
	// NoDecay exempts the parameter from weight decay, for optimizers that
	// decay. Layers set it for what they know is exempt (LayerNorm's gain
	// and bias); a model sets it for the rest (the GPT exempts every 1-D
	// parameter, as nanoGPT does). Linear leaves its bias decayed, as the
	// MLP has always trained.
	NoDecay bool
	// TiedTo, when set, names a parameter declared earlier (by another
	// layer) that this one is: it takes no arena space of its own, the layer
	// gets that parameter's views, and its gradient adds to the other use's.
	// Shape must match; Init and the fans are the owner's.
	TiedTo string
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
	// AddGrads[k], when true, says that Grads[k] already holds another
	// layer's gradient of the same (tied) parameter when this layer's
	// Backward runs: Backward adds to it instead of overwriting it. nil
	// means false for all.
	AddGrads []bool
	// Scratch, when set, is where the layer's activations come from
	// (Alloc): memory that other parts of the model share, because a
	// Checkpoint recomputes them. A composite layer passes it on to the
	// layers it builds. nil: the engine's memory, the layer's own.
	Scratch *Scratch

	// A bf16 build (models/bf16.go), which only the layers of this package
	// take: bf16 says the layer builds its bf16 form, half are the bf16
	// copies of Params, onto that the layer ends a residual block (its
	// output lands on the block's input), into that it begins one (its
	// input gradient adds into the block's; also in fp32, where the block
	// has an input gradient: Residual.addsIn), keep that its output is a
	// Checkpoint's (memory of its own, not the Scratch's), grads is the
	// block's part of the input gradients the blocks share, notes collects
	// what the plans run.
	bf16, onto, into, keep bool
	half                   []compute.Tensor
	grads                  *gradPart
	notes                  *bf16Notes
}

// AddGrad reports AddGrads[k] (false when AddGrads is nil).
func (b Build) AddGrad(k int) bool { return k < len(b.AddGrads) && b.AddGrads[k] }

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
	// layer's parameters into the Grads views (overwriting them, or adding
	// to those Build.AddGrads marks), and returns
	// the gradient at the input (nil when NeedInputGrad was false). It may
	// overwrite dy, and may return dy itself as the input gradient.
	Backward(dy compute.Tensor) compute.Tensor
}

// Inputs is one micro-batch on the engine, as a Model reads it.
type Inputs struct {
	// X is the float input (Rows, In...) of a model whose Data says float
	// inputs; nil otherwise.
	X compute.Tensor
	// Tokens are the token ids (Rows·T) of a model that reads tokens.
	Tokens compute.Labels
	// Targets are the targets: one per sample (Rows) or one per position
	// (Rows·T); -1 is ignored (padding).
	Targets compute.Labels
}

// Model is what the trainer trains: it maps a typed batch to a loss and its
// metrics. The metrics are three sums the model adds to a stats tensor (3):
// the loss summed over the targets that are not -1, how many of those the
// model predicted right (arg-max), and how many there were (samples for a
// classifier, tokens for a language model).
type Model interface {
	// Name is the registry name or a user's label.
	Name() string
	// Params declares every parameter in arena order (tied uses are not
	// listed: each parameter once).
	Params() []ParamSpec
	// Data describes the batches the model reads: one sample's input shape
	// and type, targets per sample, classes (or vocabulary size).
	Data() datasets.Spec
	// Build binds the parameter and gradient views (in Params order) and
	// allocates activations for rows samples.
	Build(e compute.Engine, params, grads []compute.Tensor, rows int) error
	// Forward runs the model and its loss on in, adds the three sums to
	// stats (3) and keeps, for Backward, the gradient of scale times the
	// summed loss (scale 0: evaluation, no gradient needed).
	Forward(in Inputs, scale float32, stats compute.Tensor)
	// Backward computes the parameters' gradients from what Forward kept.
	// Parameters finish in reverse arena order; after parameter i and all
	// later ones have their final gradients it calls ready(i), so that the
	// trainer can start reducing that part of the gradient arena while
	// backward goes on. ready may be nil.
	Backward(ready func(firstParam int))
}

// Network is a classifier's network: from (Batch, In...) inputs to
// (Batch, Classes) logits. NewClassifier makes it a Model.
type Network interface {
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
