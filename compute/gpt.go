package compute

import "errors"

// ErrFusedShape is what FuseGPT's refusal of a shape its kernels do not
// take wraps (a head size, a context length, a width): models.GPT at
// PrecisionAuto then runs the engine's fp32 operation groups instead.
var ErrFusedShape = errors.New("a shape the fused kernels do not take")

// GPTFuser is offered by engines that run a whole GPT-2-style transformer
// as one planned sequence of their own kernels (compute/cuda: bf16 kernels,
// cuBLASLt GEMMs with fused epilogues, flash attention) instead of one
// engine call per layer. models.GPT uses it in bf16.
type GPTFuser interface {
	// FuseGPT plans the model of shape s over params and grads, the
	// views of models.GPT's parameters in its Params order (fp32 master
	// weights and their gradients in the arenas). The plan allocates the
	// activations of s.Rows sequences.
	FuseGPT(s GPTShape, params, grads []Tensor) (FusedGPT, error)
}

// GPTShape is the shape of a fused GPT: Layers pre-LayerNorm blocks of
// Heads heads over Width channels, Context positions, Vocab tokens, and
// Rows sequences per micro-batch.
type GPTShape struct {
	Layers, Heads, Width, Context, Vocab int
	Rows                                 int
}

// FusedGPT is a planned GPT: its forward with the loss, and its backward
// into the gradient arena. The gradients are written (not added to), as a
// model's Backward writes them.
type FusedGPT interface {
	// Forward reads tokens and targets (Rows·Context each, -1 targets
	// ignored), computes the logits, the loss and its gradient (times
	// scale), and adds to stats (3) the summed loss, 0 correct
	// predictions (not counted by the fused classifier) and the number of
	// counted targets.
	Forward(tokens, targets Labels, scale float32, stats Tensor)
	// Backward propagates the last Forward's loss to every parameter's
	// gradient.
	Backward()
	// NextLogits runs the model on tokens (Rows·Context ids) and copies
	// the logits of position row (Vocab of them) to dst as float32, waiting
	// for the device: for sampling, not for training.
	NextLogits(tokens Labels, row int, dst []float32) error
	// Describe says in one line what runs (kernels, precision).
	Describe() string
	// Close releases the plan's device memory and GEMM plans.
	Close() error
}
