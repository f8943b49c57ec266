package compute

import (
	"fmt"
	"strings"
)

// The operation groups below are what models beyond the MLP are made of. An
// engine implements the groups it has; a model asks for the groups it needs
// with Require at build time, so that a missing operation is one error line
// naming the engine and the operation, never a panic in the middle of a step.
// Every group has one conformance suite in compute/computetest that every
// engine that has the group runs.

// Norms is layer normalisation over the last dimension.
type Norms interface {
	// LayerNorm normalises each row of x (R,C): y = (x-mean)*rstd*w + b,
	// w and b (C); it writes mean and rstd (R) for LayerNormBackward.
	LayerNorm(y, mean, rstd, x, w, b Tensor, eps float32)
	// LayerNormBackward takes dy (R,C), the gradient at y, and writes dw and
	// db (C) (overwriting them) and the gradient at x into dx (R,C): added
	// to what dx holds when addDX is true (a residual stream's gradient),
	// overwriting it otherwise.
	LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd Tensor, addDX bool)
}

// GELUs is the GELU activation in GPT-2's tanh approximation,
// 0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³))).
type GELUs interface {
	// GELU computes y = gelu(x) (same size; y may not alias x).
	GELU(y, x Tensor)
	// GELUBackward computes dx = dy·gelu'(x); dx may be dy.
	GELUBackward(dx, dy, x Tensor)
}

// Indexing gathers and scatters rows of a table by int32 indices (token
// and position embeddings). An index of -1 is padding: it reads as a zero
// row and its gradient goes nowhere.
type Indexing interface {
	// GatherRows sets dst[i] = table[idx[i]] for every row i of dst (N,C),
	// or adds it to dst[i] when accumulate is true; table is (V,C), idx (N).
	GatherRows(dst, table Tensor, idx Labels, accumulate bool)
	// ScatterAddRows adds src[i] to table[idx[i]] for every row i of src
	// (N,C), in row order (so the sums have the same bits on every run).
	ScatterAddRows(table, src Tensor, idx Labels)
}

// BatchedMatMul is Gemm over a batch of matrices: a (batch,·,·) tensor is
// batch matrices laid out back to back.
type BatchedMatMul interface {
	// GemmBatched computes c[i] = alpha·op(a[i])·op(b[i]) + beta·c[i] for
	// every i of the leading dimension (see Engine.Gemm for op and shapes).
	GemmBatched(transA, transB bool, alpha float32, a, b Tensor, beta float32, c Tensor)
}

// Attention is causal multi-head self-attention, the part of a transformer
// block between the QKV projection and the output projection.
type Attention interface {
	// CausalAttention prepares attention for a batch of shape s at build
	// time (its scratch memory); it fails, saying why, when the engine
	// cannot run that shape.
	CausalAttention(s AttentionSpec) (AttentionPlan, error)
}

// AttentionSpec is the shape of a CausalAttention: B sequences of T
// positions, width C = Heads·(C/Heads).
type AttentionSpec struct {
	B, T, C, Heads int
	// DType is the precision of qkv, out and their gradients: F32, or
	// BF16 on an engine with BF16Tensors. In flash attention (bf16, and
	// the CUDA engine's fp32 at a head size up to 64) the scores are never
	// in memory; the plan keeps each row's log-sum-exp and remembers the
	// forward's out for Backward, so out must stay as Forward left it
	// until then. A bf16 plan also has Path() string,
	// saying which kernels run.
	DType DType
}

// AttentionPlan runs one prepared attention shape. Like Engine's methods,
// its methods allocate nothing.
type AttentionPlan interface {
	// Forward reads qkv (B,T,3C), each position's queries, keys and values
	// side by side (head h's query is qkv[b,t,h·hs:(h+1)·hs], its key C
	// later, its value 2C later), and writes out (B,T,C): per head
	// softmax(q·kᵀ/√hs, causal)·v, heads side by side. It keeps what
	// Backward needs.
	Forward(out, qkv Tensor)
	// Backward takes dout (B,T,C) and the forward's qkv and writes dqkv
	// (B,T,3C), overwriting it.
	Backward(dqkv, dout, qkv Tensor)
}

// MissingOpError is what Require returns when an engine lacks an operation
// group.
type MissingOpError struct {
	Engine, Op, Group string
}

func (e *MissingOpError) Error() string {
	return fmt.Sprintf("engine %s has no %s (compute.%s)", e.Engine, e.Op, e.Group)
}

// Require returns e as the operation group G, or a *MissingOpError naming
// the engine and op (the operation the caller needs, "layer norm") when e
// does not have it. Models call it in Build.
func Require[G any](e Engine, op string) (G, error) {
	g, ok := e.(G)
	if !ok {
		name := fmt.Sprintf("%T", (*G)(nil))
		name = strings.TrimPrefix(strings.TrimPrefix(name, "*"), "compute.")
		return g, &MissingOpError{Engine: e.Name(), Op: op, Group: name}
	}
	return g, nil
}
