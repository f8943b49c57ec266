// Package compute is the arithmetic behind symddp's models: an Engine runs
// the handful of operations that layers, losses and optimizers are made of, on
// tensors that are views over flat arenas.
//
// Model code is written once against Engine. The CPU engine (compute/cpu)
// keeps tensors as gorgonia.org/tensor Dense views over host memory and runs
// GEMM through OpenBLAS when it is installed, gonum's pure-Go BLAS otherwise.
// The CUDA engine (compute/cuda) keeps them in device memory and runs the
// project's kernels and cuBLAS through the C-ABI library.
//
// Tensors are row-major and described by the project's own types, [Shape]
// and [DType]; the arenas and the operations of the Engine interface are
// float32 (DType F32); token ids and labels are int32 ([Labels]). Every
// operation writes into memory the caller allocated at build time: nothing
// allocates on the hot path.
//
// Beyond the Engine interface, operations come in groups (ops.go: Norms,
// GELUs, Indexing, BatchedMatMul, Attention; ops_llama.go: RMSNorms,
// SwiGLUs, Rotary, GroupedAttention) that an engine implements when it has
// them; a model asks for them with [Require] at build time. bf16 is a
// precision of the groups and plans (bf16.go): an engine with
// [BF16Tensors] takes bf16 activations where a spec says so, over a bf16
// copy of the fp32 master weights ([Masters]), and a model asks first with
// [CheckBF16].
//
// Operations on matrices (Gemm, BiasAct, BiasActBackward,
// SoftmaxCrossEntropy) read a tensor of rank above 2 as the matrix
// (Shape[0], product of the other dimensions), so that a batch of images
// (B,28,28) feeds a Linear layer without a reshape.
package compute

import (
	"fmt"
	"strings"
)

// DType is a tensor's element type.
type DType uint8

// Element types.
const (
	F32  DType = iota // float32
	BF16              // bfloat16 (device engines)
	I32               // int32 (token ids, labels)
)

// String is the type's short name ("f32").
func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case I32:
		return "i32"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Bytes is the size of one element.
func (d DType) Bytes() int {
	if d == BF16 {
		return 2
	}
	return 4
}

// Shape is a tensor's shape, row-major: the size of each dimension.
type Shape []int

// Size is the number of elements (1 for an empty shape).
func (s Shape) Size() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// String writes the shape as "(2, 3)".
func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// Tensor is a tensor that an Engine made (Alloc or View). On the CPU engine
// its memory is a host slice (HostData); on a device engine, device memory.
type Tensor interface {
	// Shape is the tensor's shape, row-major. The caller must not modify it.
	Shape() Shape
	// DType is the element type.
	DType() DType
	// Size is the number of elements.
	Size() int
}

// Arena is flat float32 memory that tensors can view: parameters, gradients
// or optimizer state. Exactly one of Host and Dev is set.
type Arena struct {
	// Host is the arena in host memory (CPU engine).
	Host []float32
	// Dev is the device address of the arena (CUDA engine), N elements long.
	Dev uintptr
	// N is the arena's length in elements (len(Host) for host arenas).
	N int
}

// HostArena wraps a host slice as an Arena.
func HostArena(s []float32) Arena { return Arena{Host: s, N: len(s)} }

// Len is the arena's length in elements.
func (a Arena) Len() int {
	if a.Host != nil {
		return len(a.Host)
	}
	return a.N
}

// Activation is the elementwise function fused after a bias add.
type Activation uint8

// Activations.
const (
	Identity Activation = iota
	ReLU
)

// Labels holds a batch's class labels on the engine; -1 marks a padding row
// that contributes nothing to the loss, its gradient or the metrics.
type Labels interface {
	Len() int
}

// Engine runs the operations. Methods panic on programmer error (mismatched
// shapes, a tensor from another engine) and never allocate after build time.
type Engine interface {
	// Name says which engine and which BLAS, for the log ("cpu/openblas").
	Name() string

	// Alloc returns a zeroed tensor owned by the engine (activations,
	// workspaces). Call it at build time only.
	Alloc(shape ...int) Tensor
	// View returns a tensor over elements [off, off+prod(shape)) of a.
	View(a Arena, off int, shape ...int) Tensor
	// AllocLabels returns room for n labels.
	AllocLabels(n int) Labels

	// SetTensor copies host data into t (len(src) == t.Size()).
	SetTensor(t Tensor, src []float32)
	// ReadTensor copies t into host memory (len(dst) == t.Size()).
	ReadTensor(dst []float32, t Tensor)
	// SetLabels copies host labels into l.
	SetLabels(l Labels, src []int32)
	// Zero sets every element of t to 0.
	Zero(t Tensor)
	// Copy copies src into dst (same size).
	Copy(dst, src Tensor)

	// Gemm computes c = alpha*op(a)*op(b) + beta*c, where op(x) is x or its
	// transpose. a, b, c are matrices: op(a) is (M,K), op(b) is (K,N), c is
	// (M,N); c must not overlap a or b.
	Gemm(transA, transB bool, alpha float32, a, b Tensor, beta float32, c Tensor)
	// BiasAct computes y = act(y + bias) in place; y is (B,N), bias is (N)
	// or nil.
	BiasAct(y, bias Tensor, act Activation)
	// BiasActBackward turns dy, the gradient at the activation's output,
	// into the gradient at its input in place (dy *= act'(y), where y is the
	// activation's output), then sets dbias = column sums of dy, or adds
	// them when accumulate is true. dbias may be nil. dy, y are (B,N).
	BiasActBackward(dy, y, dbias Tensor, act Activation, accumulate bool)
	// SoftmaxCrossEntropy reads logits (B,C) and labels (B), writes
	// dlogits = (softmax(logits) - onehot(label)) * scale for every row whose
	// label is not -1 (zero rows otherwise), and adds to stats (3): the sum
	// of the rows' cross-entropy losses, the number of rows whose arg-max is
	// the label, and the number of labelled rows.
	SoftmaxCrossEntropy(logits Tensor, labels Labels, dlogits Tensor, scale float32, stats Tensor)
	// Accumulate computes dst += src (gradient accumulation).
	Accumulate(dst, src Tensor)
	// Scale computes t *= s.
	Scale(t Tensor, s float32)
	// SumSquares returns the sum of squares of t (for gradient clipping);
	// on device engines this synchronises.
	SumSquares(t Tensor) float64

	// Sync waits until every operation issued so far is complete.
	Sync() error
}

// HostData returns the float32 slice behind a tensor of a host engine, or
// nil when t lives on a device. Custom layers that only run on the CPU use it
// to write their own loops. It does not allocate.
func HostData(t Tensor) []float32 {
	if t == nil || t.DType() != F32 {
		return nil
	}
	if h, ok := t.(interface{ Float32s() []float32 }); ok {
		return h.Float32s()
	}
	return nil
}

// Joiner is an engine that views tensors lying back to back in its memory
// as one. A layer whose parameters are declared apart, for their names and
// initialisation, but multiplied as one matrix asks for it: Llama's q_proj,
// k_proj and v_proj, which ddp lays out one after the other (as it lays out
// every model's parameters, in declaration order), are one GEMM.
type Joiner interface {
	// Join returns a tensor of the given shape over ts, which must be of one
	// element type, lie back to back in this order and hold prod(shape)
	// elements in all; it returns nil when they do not.
	Join(shape []int, ts ...Tensor) Tensor
}

// LinearFuser is implemented by engines that can run a Linear layer's bias,
// activation and their gradients inside the layer's GEMMs (compute/cuda:
// cuBLASLt epilogues), so that a layer takes fewer kernels. models.Linear
// uses it when its engine has it and the plain operations (Gemm, BiasAct,
// BiasActBackward) otherwise; the CPU engine has none.
type LinearFuser interface {
	// FuseLinear prepares a Linear layer's fused work at build time. It
	// fails, saying why, when the engine runs this layer with the plain
	// operations (fusion switched off, nothing fusable on this device).
	FuseLinear(s LinearSpec) (FusedLinear, error)
}

// LinearSpec is a Linear layer y = act(x·Wᵀ + b) as FuseLinear sees it:
// the views and buffers its Build bound or allocated.
type LinearSpec struct {
	// Name names the layer in reports ("fc1").
	Name           string
	Batch, In, Out int
	Act            Activation
	// W (Out,In), B (Out) and their gradients DW, DB.
	W, B, DW, DB Tensor
	// Y (Batch,Out) is the output; DX (Batch,In...) the input gradient,
	// nil when the layer does not compute it (the first layer).
	Y, DX Tensor

	// DType is the precision of the layer's activations (x, Y, DX) and of
	// W and B: F32, or BF16 on an engine with BF16Tensors, where W and B
	// are bf16 copies of the masters (Masters.Views) and DW, DB stay fp32.
	// The options below are bf16's; there B and DB may be nil (no bias).
	DType DType
	// GELU applies GPT-2's GELU after the bias (Act is Identity), keeping
	// the pre-activation: the next layer's input-gradient GEMM applies its
	// derivative (ChainInput), else this layer's Backward does.
	GELU bool
	// Residual makes the plan a ResidualLinear: its output lands on a
	// residual stream, Y = r + x·Wᵀ + b, in the GEMM.
	Residual bool
	// AddDW: Backward adds dW to DW (a tied weight whose other use wrote
	// it first) instead of overwriting it.
	AddDW bool
	// Aux (Batch,Out), bf16, is where a GELU layer keeps its
	// pre-activation: memory the caller chose (a model's shared scratch
	// when it recomputes the layer); nil: the plan allocates its own.
	Aux Tensor
}

// FusedLinear is a Linear layer's work on an engine that fuses it. Like
// Engine's methods, its methods allocate nothing and may be recorded in a
// CUDA graph.
type FusedLinear interface {
	// Forward computes Y = act(x·Wᵀ + b) from x (Batch,In...), keeping what
	// Backward needs (the ReLU mask).
	Forward(x Tensor)
	// Backward takes dy (Batch,Out), the gradient at Y, and the forward's
	// x, writes DW and DB (overwriting them) and DX when there is one, and
	// returns DX (nil without one). It may overwrite dy. After ChainInput
	// (this layer as prev) dy is instead the gradient before the activation
	// and DB is already written, when the next layer's Backward said so.
	Backward(dy, x Tensor) Tensor
	// ChainInput fuses prev's backward into this layer's: prev is the layer
	// whose Y is this layer's input, and this layer's input-gradient GEMM
	// then also applies prev's ReLU derivative and writes prev's bias
	// gradient, which prev's Backward skips. It fails, and nothing changes,
	// when the two cannot be chained.
	ChainInput(prev FusedLinear) error
	// Path says how the layer runs: "fused: ..." naming the fused parts, or
	// "unfused: <why>".
	Path() string
}

// The checks below are shared by the engines (compute/cpu, compute/cuda), so
// that their shapes and messages agree.

// ShapeSize returns the number of elements of shape and panics, naming the
// engine and the operation, when it is empty or has a dimension below 1.
func ShapeSize(engine, op string, shape []int) int {
	if len(shape) == 0 {
		panic(fmt.Sprintf("%s: %s with an empty shape", engine, op))
	}
	n := 1
	for _, d := range shape {
		if d <= 0 {
			panic(fmt.Sprintf("%s: %s with shape %v", engine, op, shape))
		}
		n *= d
	}
	return n
}

// GemmDims returns Gemm's M, N and K for matrices a (ar,ac), b (br,bc) and
// c (cr,cc), and whether they fit: op(a) (M,K) times op(b) (K,N) into c
// (M,N).
func GemmDims(transA, transB bool, ar, ac, br, bc, cr, cc int) (m, n, k int, ok bool) {
	m, k = ar, ac
	if transA {
		m, k = ac, ar
	}
	kb, n := br, bc
	if transB {
		kb, n = bc, br
	}
	return m, n, k, k == kb && cr == m && cc == n
}

// GemmMismatch says what does not fit in a Gemm whose GemmDims are not ok.
func GemmMismatch(transA, transB bool) string {
	what := "op(a) (M,K) times op(b) (K,N) into c (M,N) does not fit"
	if transA || transB {
		what += " with"
		if transA {
			what += " a transposed"
		}
		if transB {
			what += " b transposed"
		}
	}
	return what
}

// GemmBatchedDims returns GemmBatched's M, N and K and the batch for the
// rank-3 shapes of a, b and c, and panics, with the engine's prefix, when
// they are not three batches of the same length or do not fit.
func GemmBatchedDims(engine string, transA, transB bool, as, bs, cs Shape) (m, n, k, batch int) {
	const op = "GemmBatched"
	if len(as) != 3 || len(bs) != 3 || len(cs) != 3 || as[0] != bs[0] || as[0] != cs[0] {
		PanicShapes(engine, op, "a, b and c must be rank 3 with the same leading dimension", as, bs, cs)
	}
	m, n, k, ok := GemmDims(transA, transB, as[1], as[2], bs[1], bs[2], cs[1], cs[2])
	if !ok {
		PanicShapes(engine, op, GemmMismatch(transA, transB), as, bs, cs)
	}
	return m, n, k, as[0]
}

// LayerNormDims checks the shapes of a LayerNorm for engine (y the size of
// x, w and b one element per column of x's last dimension, mean and rstd
// one per row) and returns x's rows and columns. The engines share it, so
// that their checks and messages agree.
func LayerNormDims(engine string, x, y, w, b, mean, rstd Shape) (rows, cols int) {
	const op = "LayerNorm"
	rows, cols = normRows(x)
	if y.Size() != x.Size() {
		PanicShapes(engine, op, "y must have the size of x", x, y)
	}
	if w.Size() != cols || b.Size() != cols {
		PanicShapes(engine, op, "w and b must have one element per column of x", x, w, b)
	}
	normStats(engine, op, x, mean, rstd, rows)
	return rows, cols
}

// LayerNormBackwardDims is LayerNormDims for a LayerNormBackward: dx and
// dy the size of x, w, dw and db one element per column.
func LayerNormBackwardDims(engine string, x, dx, dy, w, dw, db, mean, rstd Shape) (rows, cols int) {
	const op = "LayerNormBackward"
	rows, cols = normRows(x)
	if dx.Size() != x.Size() || dy.Size() != x.Size() {
		PanicShapes(engine, op, "dx and dy must have the size of x", x, dx, dy)
	}
	if w.Size() != cols || dw.Size() != cols || db.Size() != cols {
		PanicShapes(engine, op, "w, dw and db must have one element per column of x", x, w, dw, db)
	}
	normStats(engine, op, x, mean, rstd, rows)
	return rows, cols
}

// normRows is the rows (the product of all but the last dimension) and
// columns (the last) of a layer norm's x.
func normRows(x Shape) (rows, cols int) {
	cols = x[len(x)-1]
	return x.Size() / cols, cols
}

// normStats checks a layer norm's mean and rstd: one element per row of x.
func normStats(engine, op string, x, mean, rstd Shape, rows int) {
	if mean.Size() != rows || rstd.Size() != rows {
		PanicShapes(engine, op, "mean and rstd must have one element per row of x", x, mean, rstd)
	}
}

// The panics below are shared by the engines too: engine is their
// messages' prefix ("cpu", "cuda"). They are out of line so that formatting
// their messages costs nothing on the paths that do not fail.

// PanicShape panics with "<engine>: <op>: want <want>, got shape <got>".
//
//go:noinline
func PanicShape(engine, op, want string, got Shape) {
	panic(fmt.Sprintf("%s: %s: want %s, got shape %v", engine, op, want, []int(got)))
}

// PanicShapes panics with "<engine>: <op>: <what>; shapes <shapes>".
//
//go:noinline
func PanicShapes(engine, op, what string, shapes ...Shape) {
	s := make([][]int, len(shapes))
	for i, sh := range shapes {
		s[i] = sh
	}
	panic(fmt.Sprintf("%s: %s: %s; shapes %v", engine, op, what, s))
}

// PanicLabel panics for row's label, which is neither -1 nor in
// 0..classes-1.
//
//go:noinline
func PanicLabel(engine, op string, row, label, classes int) {
	panic(fmt.Sprintf("%s: %s: row %d has label %d, want -1 or 0..%d", engine, op, row, label, classes-1))
}
