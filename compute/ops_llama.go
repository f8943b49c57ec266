package compute

import (
	"fmt"
	"math"
)

// The operation groups of a Llama-style block (models.Llama): RMSNorm,
// rotary position embedding, SwiGLU's elementwise part and attention with
// fewer key/value heads than query heads. Like the groups of ops.go, an
// engine implements those it has and a model asks for them with Require.

// RMSNorms is root-mean-square normalisation over the last dimension, as
// Llama normalises: no centring and no bias. On an engine with BF16Tensors
// whose CheckBF16 takes an RMSNormSpec, x, y, w, dy and dx may be bf16
// (all of them): the statistics, rstd and dw stay fp32.
type RMSNorms interface {
	// RMSNorm normalises each row of x (R,C): y = x·rstd·w with
	// rstd = 1/sqrt(mean(x²)+eps) computed in fp32, w (C); it writes rstd
	// (R) for RMSNormBackward. y may not overlap x.
	RMSNorm(y, rstd, x, w Tensor, eps float32)
	// RMSNormBackward takes dy (R,C), the gradient at y, writes dw (C)
	// (overwriting it) and the gradient at x into dx (R,C): added to what
	// dx holds when addDX is true (a residual stream's gradient),
	// overwriting it otherwise.
	RMSNormBackward(dx, dw, dy, x, w, rstd Tensor, addDX bool)
}

// SwiGLUs is the elementwise part of a SwiGLU feed-forward layer,
// silu(a)⊙b with silu(a) = a·σ(a), a and b read from one packed tensor:
// each row [a | b], gate_proj's and up_proj's outputs side by side as one
// GEMM over their joined weights writes them. The projections around it
// are Gemm. On an engine with BF16Tensors whose CheckBF16 takes a
// SwiGLUSpec, every tensor of a call may be bf16 (all of them; float32
// arithmetic).
type SwiGLUs interface {
	// SwiGLU computes y = silu(a)·b element by element for y (R, ..., F)
	// from ab (R, ..., 2F), row r of ab being [a | b] for row r of y. y
	// may not overlap ab.
	SwiGLU(y, ab Tensor)
	// SwiGLUBackward takes dy (R, ..., F), the gradient at y, and writes
	// dab (R, ..., 2F), row r [da | db] with da = dy·b·silu'(a) and db =
	// dy·silu(a) (overwriting it). dab may not overlap dy or ab.
	SwiGLUBackward(dab, dy, ab Tensor)
}

// Rotary is rotary position embedding (RoPE) of queries and keys.
type Rotary interface {
	// RotaryEmbedding prepares the rotation of rows at positions
	// 0..T-1 (its cos and sin table) at build time; it fails, saying why,
	// when the head size is odd or a size is below 1.
	RotaryEmbedding(s RotarySpec) (RotaryPlan, error)
}

// RotarySpec is a rotary embedding: positions 0..T-1, heads of HeadSize
// (even) channels, base Theta (Llama 2: 10000, Llama 3: 500000).
//
// The convention is Hugging Face's rotate_half (also GPT-NeoX's): a head's
// channel i in the first half turns with channel i+HeadSize/2 by the angle
// t·Theta^(-2i/HeadSize) at position t:
//
//	y[i]       = x[i]·cos - x[i+hs/2]·sin
//	y[i+hs/2]  = x[i+hs/2]·cos + x[i]·sin
//
// (Meta's original code turns adjacent pairs (2i, 2i+1) instead; Hugging
// Face's converter permutes the rows of q_proj and k_proj between the two.)
// With this convention q_proj and k_proj are stored as LlamaForCausalLM
// stores them, so a checkpoint goes to and from Hugging Face unpermuted.
type RotarySpec struct {
	T, HeadSize int
	Theta       float64
}

// Table returns the cos and sin table of s, (T, HeadSize/2) each: entry
// (t, i) is the cosine and sine of the angle t·Theta^(-2i/HeadSize),
// computed in float64 and then rounded to float32, so that every engine
// rotates by the same float32 numbers. It fails when the head size is odd,
// T or the head size is below 1, or Theta is not a finite number above 1.
func (s RotarySpec) Table() (cos, sin []float32, err error) {
	if err := s.Check(); err != nil {
		return nil, nil, err
	}
	half := s.HeadSize / 2
	cos, sin = make([]float32, s.T*half), make([]float32, s.T*half)
	for t := 0; t < s.T; t++ {
		for i := 0; i < half; i++ {
			freq := math.Pow(s.Theta, -float64(2*i)/float64(s.HeadSize))
			sn, cs := math.Sincos(float64(t) * freq)
			cos[t*half+i], sin[t*half+i] = float32(cs), float32(sn)
		}
	}
	return cos, sin, nil
}

// Check says whether s is a rotary embedding (nil) or what is wrong: T
// or the head size below 1, an odd head size, Theta not a finite number
// above 1.
func (s RotarySpec) Check() error {
	if s.T < 1 || s.HeadSize < 2 || s.HeadSize%2 != 0 || !(s.Theta > 1) || math.IsInf(s.Theta, 0) {
		return fmt.Errorf("rotary embedding %+v: want T >= 1, an even head size and a finite theta above 1", s)
	}
	return nil
}

// OpName is "rotary embedding".
func (RotarySpec) OpName() string { return "rotary embedding" }

// RMSNormSpec is an RMSNorm's sizes as CheckBF16 sees them: Rows rows of
// Cols, eps.
type RMSNormSpec struct {
	Rows, Cols int
	Eps        float32
}

// OpName is "RMSNorm".
func (RMSNormSpec) OpName() string { return "RMSNorm" }

// SwiGLUSpec is the size of a SwiGLU as CheckBF16 sees it: Rows rows of
// Cols outputs (2·Cols inputs).
type SwiGLUSpec struct{ Rows, Cols int }

// OpName is "SwiGLU".
func (SwiGLUSpec) OpName() string { return "SwiGLU" }

// RotaryPlan rotates tensors of one prepared RotarySpec, in place. Its
// methods allocate nothing. On an engine with BF16Tensors whose CheckBF16
// takes the RotarySpec, x (dx) may be bf16.
type RotaryPlan interface {
	// Forward rotates the first heads·HeadSize columns of every row of x in
	// place and leaves its other columns as they are. x is (R, ..., W),
	// read as R' rows of its last dimension W >= heads·HeadSize (such as a
	// packed (B,T,(Heads+2·KVHeads)·hs) whose query and key heads come
	// first), R' a multiple of T: row r is at position r mod T.
	Forward(x Tensor, heads int)
	// Backward sets the first heads·HeadSize columns of every row of dx,
	// the gradient at the rotation's output, to the gradient at its input:
	// the inverse rotation, in place.
	Backward(dx Tensor, heads int)
}

// GroupedAttention is causal self-attention with grouped key/value heads
// (GQA): Heads query heads share KVHeads key/value heads, query heads
// g·h..g·h+g-1 reading key/value head h, g = Heads/KVHeads (the order of
// Hugging Face's repeat_kv). The keys and values are read where they are,
// never copied per query head. KVHeads == Heads is multi-head attention and
// KVHeads == 1 multi-query attention.
//
// Queries, keys and values come packed in one tensor, as one projection
// over Llama's adjacent q_proj, k_proj and v_proj weights writes them: each
// row the Heads query heads, then the KVHeads key heads, then the KVHeads
// value heads (GroupedAttentionSpec.Width columns). Every engine reads them
// where they lie, rows Width apart.
type GroupedAttention interface {
	// GroupedCausalAttention prepares attention for a batch of shape s at
	// build time (its scratch memory); it fails, saying why, when the
	// engine cannot run that shape or Heads is not a multiple of KVHeads.
	GroupedCausalAttention(s GroupedAttentionSpec) (GroupedAttentionPlan, error)
}

// GroupedAttentionSpec is the shape of a GroupedCausalAttention: B
// sequences of T positions, Heads query heads and KVHeads key/value heads
// of HeadSize channels.
type GroupedAttentionSpec struct {
	B, T, Heads, KVHeads, HeadSize int
	// DType is the precision of q, k, v, out and their gradients: F32, or
	// BF16 on an engine with BF16Tensors. In flash attention (bf16, and
	// the CUDA engine's fp32 at a head size up to 64) the scores are never
	// in memory; the plan keeps each row's log-sum-exp and remembers the
	// forward's out for Backward, so out must stay as Forward left it until
	// then. A bf16 plan also has Path() string, saying which kernels run.
	DType DType
}

// OpName is "grouped-query attention".
func (GroupedAttentionSpec) OpName() string { return "grouped-query attention" }

// Check says whether s is a shape of grouped attention: every size at
// least 1 and Heads a multiple of KVHeads (nil), or what is wrong.
func (s GroupedAttentionSpec) Check() error {
	if s.B < 1 || s.T < 1 || s.Heads < 1 || s.KVHeads < 1 || s.HeadSize < 1 || s.Heads%s.KVHeads != 0 {
		return fmt.Errorf("grouped causal attention %+v: want B, T, Heads, KVHeads, HeadSize >= 1 with Heads a multiple of KVHeads", s)
	}
	return nil
}

// Width is the columns of a packed row of queries, keys and values:
// (Heads + 2·KVHeads)·HeadSize. Queries start at column 0, keys at
// Heads·HeadSize, values at (Heads+KVHeads)·HeadSize.
func (s GroupedAttentionSpec) Width() int { return (s.Heads + 2*s.KVHeads) * s.HeadSize }

// Group is the number of query heads that share a key/value head,
// Heads/KVHeads.
func (s GroupedAttentionSpec) Group() int { return s.Heads / s.KVHeads }

// KVHead is the key/value head that query head h reads: h/Group(), so that
// query heads g·j .. g·j+g-1 read head j (Hugging Face's repeat_kv). Every
// engine maps heads with it.
func (s GroupedAttentionSpec) KVHead(h int) int { return h / s.Group() }

// FirstOfGroup says whether query head h is the first that reads its
// key/value head: in a backward that sums a key/value head's gradients
// over its query heads in order, the one whose products overwrite them.
func (s GroupedAttentionSpec) FirstOfGroup(h int) bool { return h%s.Group() == 0 }

// GroupedAttentionPlan runs one prepared grouped attention shape. Its
// methods allocate nothing.
type GroupedAttentionPlan interface {
	// Forward reads qkv (B,T,Width()): query head h at columns h·hs..,
	// key/value head j at (Heads+j)·hs.. and (Heads+KVHeads+j)·hs.., and
	// writes out (B,T,Heads·hs): per query head h softmax(q_h·k_jᵀ/√hs,
	// causal)·v_j with j = h/(Heads/KVHeads), heads side by side. It keeps
	// what Backward needs.
	Forward(out, qkv Tensor)
	// Backward takes dout (B,T,Heads·hs) and the forward's qkv and writes
	// dqkv (qkv's shape and layout), overwriting it: a key/value head's
	// gradient sums its group's query heads.
	Backward(dqkv, dout, qkv Tensor)
}

// RMSNormDims checks the shapes of an RMSNorm for engine (y the size of x,
// w one element per column of x's last dimension, rstd one per row) and
// returns x's rows and columns.
func RMSNormDims(engine string, x, y, w, rstd Shape) (rows, cols int) {
	const op = "RMSNorm"
	rows, cols = normRows(x)
	if y.Size() != x.Size() {
		PanicShapes(engine, op, "y must have the size of x", x, y)
	}
	if w.Size() != cols {
		PanicShapes(engine, op, "w must have one element per column of x", x, w)
	}
	if rstd.Size() != rows {
		PanicShapes(engine, op, "rstd must have one element per row of x", x, rstd)
	}
	return rows, cols
}

// RMSNormBackwardDims is RMSNormDims for an RMSNormBackward: dx and dy the
// size of x, w and dw one element per column.
func RMSNormBackwardDims(engine string, x, dx, dy, w, dw, rstd Shape) (rows, cols int) {
	const op = "RMSNormBackward"
	rows, cols = normRows(x)
	if dx.Size() != x.Size() || dy.Size() != x.Size() {
		PanicShapes(engine, op, "dx and dy must have the size of x", x, dx, dy)
	}
	if w.Size() != cols || dw.Size() != cols {
		PanicShapes(engine, op, "w and dw must have one element per column of x", x, w, dw)
	}
	if rstd.Size() != rows {
		PanicShapes(engine, op, "rstd must have one element per row of x", x, rstd)
	}
	return rows, cols
}

// SwiGLUDims checks the shapes of a SwiGLU (y and the packed ab) or of its
// backward (dy and dab) and returns its rows and output width F: y (R,
// ..., F) and ab of 2·R·F elements with last dimension 2F. It panics
// (PanicShapes) on anything else.
func SwiGLUDims(engine, op string, y, ab Shape) (rows, f int) {
	if len(y) == 0 || len(ab) == 0 {
		PanicShapes(engine, op, "want rows of a last dimension", y, ab)
	}
	f = y[len(y)-1]
	if f < 1 || ab[len(ab)-1] != 2*f || ab.Size() != 2*y.Size() {
		PanicShapes(engine, op, "want y (R, F) and ab (R, 2F), each row [a | b]", y, ab)
	}
	return y.Size() / f, f
}
