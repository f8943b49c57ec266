package compute

import "errors"

// bf16 is a precision of the operation groups and plans, not a model of its
// own: an engine that computes in bf16 has BF16Tensors (bf16 activations and
// a bf16 copy of the fp32 master weights), and its groups and plans take
// bf16 where their specs say so (LinearSpec.DType, AttentionSpec.DType,
// Norms on bf16 tensors, Embeddings, CrossEntropies). The master weights,
// their gradients and the optimizer state stay fp32 in the arenas; sums
// accumulate in fp32. A layer asks at build time with CheckBF16, so that an
// engine without a bf16 form of an operation, or whose kernels do not take
// its sizes, says so in one line before anything is allocated.

// Precision is how a model computes: fp32 throughout, or bf16 activations
// and GEMMs (fp32 accumulation) with fp32 master weights, gradients and
// optimizer state.
type Precision string

// Precisions. PrecisionAuto lets the model pick: bf16 where the engine has
// a bf16 form of every operation of the model at its sizes, fp32 elsewhere.
const (
	PrecisionAuto Precision = ""
	PrecisionF32  Precision = "fp32"
	PrecisionBF16 Precision = "bf16"
)

// ErrBF16Shape is what an engine's refusal of sizes its bf16 kernels do not
// take wraps (a head size, a context length, a width): a model at
// PrecisionAuto then runs the engine's fp32 operation groups instead.
var ErrBF16Shape = errors.New("a shape the bf16 kernels do not take")

// OpSpec is the spec of an operation that may run in bf16: LinearSpec,
// AttentionSpec, NormSpec, EmbeddingSpec or CrossEntropySpec.
type OpSpec interface {
	// OpName names the operation in messages ("layer norm").
	OpName() string
}

// BF16Tensors is the group of an engine that computes in bf16.
type BF16Tensors interface {
	// AllocBF16 returns a zeroed bf16 tensor (DType BF16) owned by the
	// engine. Call it at build time only.
	AllocBF16(shape ...int) Tensor
	// BF16Masters returns a bf16 copy of params, fp32 views of one
	// parameter arena (any order): the copy's views, and the cast that
	// refreshes them. It fails, wrapping ErrBF16Shape, when the views are
	// not laid out as the bf16 kernels need (aligned).
	BF16Masters(params []Tensor) (Masters, error)
	// CheckBF16 says whether the engine runs the operation s describes in
	// bf16 (s's tensors may be nil; its DType is taken as BF16): nil, a
	// *MissingOpError when it has no bf16 form of it, or an error wrapping
	// ErrBF16Shape that says which size its kernels do not take. The
	// plans' constructors check the same.
	CheckBF16(s OpSpec) error
	// PrepareBF16 checks s as CheckBF16 does and readies the engine to run
	// it in bf16 (scratch memory its kernels need). A layer that runs an
	// operation without a plan of its own in bf16 (Norms on bf16 tensors)
	// calls it in Build; plans' constructors prepare their own.
	PrepareBF16(s OpSpec) error
}

// Masters is a bf16 copy of fp32 master weights (BF16Tensors.BF16Masters).
type Masters interface {
	// Views are the bf16 copies, one per parameter, in BF16Masters' order
	// and with its shapes.
	Views() []Tensor
	// Cast enqueues the rounding of every master to its copy (one kernel
	// over the parameters' span). Run it once per forward, before the
	// first use of the copies; it can be recorded in a graph. An engine
	// whose update writes the copy with the parameters (compute/cuda) skips
	// the work when the last update did, and is told by ParamsWritten when
	// the parameters were written another way.
	Cast()
}

// CheckBF16 asks e whether it runs s in bf16 (BF16Tensors.CheckBF16): a
// *MissingOpError naming the engine and the operation when e computes in
// fp32 only ("engine cpu/openblas has no bf16 layer norm").
func CheckBF16(e Engine, s OpSpec) error {
	b, ok := e.(BF16Tensors)
	if !ok {
		return &MissingOpError{Engine: e.Name(), Op: "bf16 " + s.OpName(), Group: "BF16Tensors"}
	}
	return b.CheckBF16(s)
}

// OpName is "Linear".
func (LinearSpec) OpName() string { return "Linear" }

// OpName is "causal attention".
func (AttentionSpec) OpName() string { return "causal attention" }

// NormSpec is a layer norm's sizes (Norms): Rows rows of Cols, eps.
type NormSpec struct {
	Rows, Cols int
	Eps        float32
}

// OpName is "layer norm".
func (NormSpec) OpName() string { return "layer norm" }

// ResidualLinear is the plan of a Linear layer whose output lands on a
// residual stream (LinearSpec.Residual): y = r + x·Wᵀ + b in one GEMM.
type ResidualLinear interface {
	FusedLinear
	// ForwardOnto computes Y = r + x·Wᵀ + b from x (Batch,In) and r
	// (Batch,Out), the residual stream, which it only reads.
	ForwardOnto(x, r Tensor)
}

// Embeddings is a GPT-2 embedding as one plan: a token's row plus its
// position's (or the token's alone without a position table), and the
// gradient scattered back into the tables.
type Embeddings interface {
	// Embedding prepares the embedding s describes at build time.
	Embedding(s EmbeddingSpec) (EmbeddingPlan, error)
}

// EmbeddingSpec is an embedding of B sequences of T positions: Tokens
// (Vocab,C) and Positions (T,C) are the tables (bf16 copies of the
// masters), DTokens and DPositions their fp32 gradients. Positions and
// DPositions nil: no learned positions (a Llama, whose rotary embedding
// places the tokens), the output is the token's row alone.
type EmbeddingSpec struct {
	B, T, C, Vocab                         int
	DType                                  DType
	Tokens, Positions, DTokens, DPositions Tensor
	// AddTokens: DTokens holds another use's gradient when Backward runs
	// (a head tied to the table): Backward adds to it.
	AddTokens bool
}

// OpName is "embedding".
func (EmbeddingSpec) OpName() string { return "embedding" }

// EmbeddingPlan runs one prepared embedding. Like Engine's methods, its
// methods allocate nothing.
type EmbeddingPlan interface {
	// Forward writes out (B·T,C): row i is Tokens[ids[i]] + Positions[i
	// mod T] (Tokens[ids[i]] without positions); ids (B·T) are kept for
	// Backward.
	Forward(out Tensor, ids Labels)
	// Backward takes dout (B·T,C) and writes the tables' gradients: the
	// rows of dout summed into the rows of their tokens and positions, in
	// a fixed order (the same bits every run); DTokens is added to with
	// AddTokens, overwritten otherwise; DPositions is overwritten.
	Backward(dout Tensor)
}

// CrossEntropies is the softmax cross-entropy of a language model's logits
// as a plan, which may keep no copy of them: the gradient overwrites them.
type CrossEntropies interface {
	// CrossEntropy prepares the loss s describes at build time.
	CrossEntropy(s CrossEntropySpec) (CrossEntropyPlan, error)
}

// CrossEntropySpec is the loss over Rows rows of Classes logits.
type CrossEntropySpec struct {
	Rows, Classes int
	DType         DType
}

// OpName is "cross-entropy".
func (CrossEntropySpec) OpName() string { return "cross-entropy" }

// CrossEntropyPlan runs one prepared loss.
type CrossEntropyPlan interface {
	// Apply reads logits (Rows,Classes) and labels (Rows, -1 ignored),
	// overwrites logits with their gradient times scale (zero rows for
	// label -1), and adds to stats (3) the summed loss, 0 correct
	// predictions (not counted) and the number of labelled rows. It returns
	// the gradient: logits.
	Apply(logits Tensor, labels Labels, scale float32, stats Tensor) Tensor
	// Path says what runs ("fused classifier ...").
	Path() string
}
