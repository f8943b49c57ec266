package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/optim"
)

// The bf16 plans one by one against the engine's fp32 operations on the
// same (bf16-exact) values: each result within bf16's rounding of the fp32
// one. The plans' bits are the bf16 kernels' (cuda/gptcheck and cudatest
// check those against references); what these tests catch is a plan that
// passes the kernels the wrong tensors, sizes or epilogues.

// bf16Engine is the engine of a bf16 test: the emulated device, or the GPU.
type bf16Engine struct {
	t   *testing.T
	e   *cuda.Engine
	rng *rand.Rand
}

func newBF16Engine(t *testing.T, e *cuda.Engine) *bf16Engine {
	return &bf16Engine{t: t, e: e, rng: rand.New(rand.NewPCG(3, uint64(len(t.Name()))))}
}

// vals is n values of deviation sd, each exact in bf16.
func (b *bf16Engine) vals(n int, sd float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(math.Float32bits(float32(b.rng.NormFloat64()*sd)) &^ 0xffff)
	}
	return v
}

// f32 is an fp32 tensor holding v.
func (b *bf16Engine) f32(v []float32, shape ...int) compute.Tensor {
	t := b.e.Alloc(shape...)
	b.e.SetTensor(t, v)
	return t
}

// bf is a bf16 tensor holding v (bf16-exact values).
func (b *bf16Engine) bf(v []float32, shape ...int) compute.Tensor {
	t := b.e.AllocBF16(shape...)
	b.e.CastToBF16(t.(*cuda.Tensor).DevicePtr(), b.f32(v, shape...))
	return t
}

func (b *bf16Engine) read(t compute.Tensor) []float32 {
	v := make([]float32, t.Size())
	b.e.ReadTensor(v, t)
	return v
}

// near checks got against want: within tol of want's largest magnitude.
func (b *bf16Engine) near(what string, got, want []float32, tol float64) {
	b.t.Helper()
	require.Len(b.t, got, len(want), what)
	scale := 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(float64(w)))
	}
	require.Greater(b.t, scale, 0.0, "%s: the reference is zero", what)
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol*scale) {
			b.t.Fatalf("%s: element %d is %v, want %v (within %g of %g)", what, i, got[i], want[i], tol, scale)
		}
	}
}

func TestBF16LinearEmulated(t *testing.T) { testBF16Linear(t, cudatest.NewEmulated(cuda.Options{})) }
func TestBF16LinearGPU(t *testing.T)      { testBF16Linear(t, gpuEngine(t)) }

// A GELU Linear chained into a Linear onto a residual stream (GPT-2's MLP):
// forward, then backward into both layers' gradients and the input's.
func testBF16Linear(t *testing.T, e *cuda.Engine) {
	b := newBF16Engine(t, e)
	const n, c, h = 32, 16, 48
	x, w1, b1, w2, b2, r, dy := b.vals(n*c, 1), b.vals(h*c, 0.3), b.vals(h, 0.3), b.vals(c*h, 0.3), b.vals(c, 0.3), b.vals(n*c, 1), b.vals(n*c, 1)
	bx, bw1, bb1, bw2, bb2, br, bdy := b.bf(x, n, c), b.bf(w1, h, c), b.bf(b1, h), b.bf(w2, c, h), b.bf(b2, c), b.bf(r, n, c), b.bf(dy, n, c)
	dw1, db1, dw2, db2 := e.Alloc(h, c), e.Alloc(h), e.Alloc(c, h), e.Alloc(c)
	y1, y2, dx1, dx2 := e.AllocBF16(n, h), e.AllocBF16(n, c), e.AllocBF16(n, c), e.AllocBF16(n, h)
	p1, err := e.FuseLinear(compute.LinearSpec{Name: "fc", Batch: n, In: c, Out: h, DType: compute.BF16, GELU: true,
		W: bw1, B: bb1, DW: dw1, DB: db1, Y: y1, DX: dx1})
	require.NoError(t, err)
	p2, err := e.FuseLinear(compute.LinearSpec{Name: "proj", Batch: n, In: h, Out: c, DType: compute.BF16, Residual: true,
		W: bw2, B: bb2, DW: dw2, DB: db2, Y: y2, DX: dx2})
	require.NoError(t, err)
	require.NoError(t, p2.ChainInput(p1))
	assert.Contains(t, p1.Path(), "GELU")
	assert.Contains(t, p2.Path(), "fc's GELU derivative")
	p1.Forward(bx)
	p2.(compute.ResidualLinear).ForwardOnto(y1, br)
	p2.Backward(bdy, y1)
	p1.Backward(dx2, bx)

	// the fp32 reference on the same engine: pre = x·W1ᵀ + b1, g = gelu(pre),
	// y = r + g·W2ᵀ + b2; dpre = (dy·W2)∘gelu'(pre)
	fx, fw1, fw2 := b.f32(x, n, c), b.f32(w1, h, c), b.f32(w2, c, h)
	pre, g, y := e.Alloc(n, h), e.Alloc(n, h), b.f32(r, n, c)
	e.Gemm(false, true, 1, fx, fw1, 0, pre)
	e.BiasAct(pre, b.f32(b1, h), compute.Identity)
	e.GELU(g, pre)
	e.Gemm(false, true, 1, g, fw2, 1, y)
	e.BiasAct(y, b.f32(b2, c), compute.Identity)
	b.near("fc output", b.read(y1), b.read(g), 1e-2)
	b.near("proj output onto the residual", b.read(y2), b.read(y), 1e-2)
	fdy := b.f32(dy, n, c)
	rw2, rb2, dg, rw1, rb1, rdx := e.Alloc(c, h), e.Alloc(c), e.Alloc(n, h), e.Alloc(h, c), e.Alloc(h), e.Alloc(n, c)
	e.Gemm(true, false, 1, fdy, b.f32(b.read(y1), n, h), 0, rw2) // dW2 from the bf16 GELU output the layer read
	e.BiasActBackward(b.f32(dy, n, c), fdy, rb2, compute.Identity, false)
	e.Gemm(false, false, 1, fdy, fw2, 0, dg)
	e.GELUBackward(dg, dg, pre)
	e.Gemm(true, false, 1, dg, fx, 0, rw1)
	e.BiasActBackward(dg, dg, rb1, compute.Identity, false)
	e.Gemm(false, false, 1, dg, fw1, 0, rdx)
	b.near("proj dW", b.read(dw2), b.read(rw2), 1e-3)
	b.near("proj db", b.read(db2), b.read(rb2), 1e-5)
	b.near("proj dx with fc's GELU derivative", b.read(dx2), b.read(dg), 2e-2)
	b.near("fc dW", b.read(dw1), b.read(rw1), 2e-2)
	b.near("fc db", b.read(db1), b.read(rb1), 2e-2)
	b.near("fc dx", b.read(dx1), b.read(rdx), 3e-2)
	require.NoError(t, e.Sync())
}

func TestBF16HeadEmulated(t *testing.T) { testBF16Head(t, cudatest.NewEmulated(cuda.Options{})) }
func TestBF16HeadGPU(t *testing.T)      { testBF16Head(t, gpuEngine(t)) }

// A bias-free Linear (a tied head): dW written, or added to with AddDW.
func testBF16Head(t *testing.T, e *cuda.Engine) {
	b := newBF16Engine(t, e)
	const n, c, v = 32, 16, 24
	x, w, dy := b.vals(n*c, 1), b.vals(v*c, 0.5), b.vals(n*v, 1)
	bx, bw, bdy := b.bf(x, n, c), b.bf(w, v, c), b.bf(dy, n, v)
	dw, y, dx := b.f32(b.vals(v*c, 1), v, c), e.AllocBF16(n, v), e.AllocBF16(n, c)
	ref, rdw, rdx := e.Alloc(n, v), e.Alloc(v, c), e.Alloc(n, c)
	e.Gemm(false, true, 1, b.f32(x, n, c), b.f32(w, v, c), 0, ref)
	e.Gemm(true, false, 1, b.f32(dy, n, v), b.f32(x, n, c), 0, rdw)
	e.Gemm(false, false, 1, b.f32(dy, n, v), b.f32(w, v, c), 0, rdx)
	for _, add := range []bool{false, true} {
		p, err := e.FuseLinear(compute.LinearSpec{Name: "head", Batch: n, In: c, Out: v, DType: compute.BF16, AddDW: add,
			W: bw, DW: dw, Y: y, DX: dx})
		require.NoError(t, err)
		p.Forward(bx)
		b.near("logits", b.read(y), b.read(ref), 1e-2)
		before := b.read(dw)
		require.Equal(t, dx, p.Backward(bdy, bx))
		want := b.read(rdw)
		if add {
			for i := range want {
				want[i] += before[i]
			}
		}
		b.near("dW", b.read(dw), want, 1e-5)
		b.near("dx", b.read(dx), b.read(rdx), 1e-2)
	}
}

func TestBF16LayerNormEmulated(t *testing.T) {
	testBF16LayerNorm(t, cudatest.NewEmulated(cuda.Options{}))
}
func TestBF16LayerNormGPU(t *testing.T) { testBF16LayerNorm(t, gpuEngine(t)) }

// Norms on bf16 tensors: forward, and backward both overwriting dx and
// adding into it (a residual stream's gradient); dw and db overwritten
// either way.
func testBF16LayerNorm(t *testing.T, e *cuda.Engine) {
	b := newBF16Engine(t, e)
	const rows, c = 40, 24
	x, w, bias, dy, d0 := b.vals(rows*c, 2), b.vals(c, 1), b.vals(c, 1), b.vals(rows*c, 1), b.vals(rows*c, 1)
	y, mean, rstd := e.AllocBF16(rows, c), e.Alloc(rows), e.Alloc(rows)
	bx, bw := b.bf(x, rows, c), b.bf(w, c)
	require.Panics(t, func() { e.LayerNorm(y, mean, rstd, bx, bw, b.bf(bias, c), 1e-5) }, "not prepared")
	require.NoError(t, e.PrepareBF16(compute.NormSpec{Rows: rows, Cols: c, Eps: 1e-5}))
	e.LayerNorm(y, mean, rstd, bx, bw, b.bf(bias, c), 1e-5)
	fy, fm, fr := e.Alloc(rows, c), e.Alloc(rows), e.Alloc(rows)
	fx, fw := b.f32(x, rows, c), b.f32(w, c)
	e.LayerNorm(fy, fm, fr, fx, fw, b.f32(bias, c), 1e-5)
	b.near("y", b.read(y), b.read(fy), 1e-2)
	b.near("mean", b.read(mean), b.read(fm), 1e-5)
	b.near("rstd", b.read(rstd), b.read(fr), 1e-5)
	fdx, fdw, fdb := e.Alloc(rows, c), e.Alloc(c), e.Alloc(c)
	e.LayerNormBackward(fdx, fdw, fdb, b.f32(dy, rows, c), fx, fw, fm, fr, false)
	for _, add := range []bool{false, true} {
		dx, dw, db := b.bf(d0, rows, c), b.f32(b.vals(c, 1), c), b.f32(b.vals(c, 1), c)
		e.LayerNormBackward(dx, dw, db, b.bf(dy, rows, c), bx, bw, mean, rstd, add)
		want := b.read(fdx)
		if add {
			for i := range want {
				want[i] += d0[i]
			}
		}
		b.near("dx", b.read(dx), want, 2e-2)
		b.near("dw", b.read(dw), b.read(fdw), 1e-4)
		b.near("db", b.read(db), b.read(fdb), 1e-4)
	}
	require.NoError(t, e.Sync())
}

func TestBF16AttentionEmulated(t *testing.T) {
	testBF16Attention(t, cudatest.NewEmulated(cuda.Options{}))
}
func TestBF16AttentionGPU(t *testing.T) { testBF16Attention(t, gpuEngine(t)) }

// The bf16 attention plan against the fp32 one.
func testBF16Attention(t *testing.T, e *cuda.Engine) {
	b := newBF16Engine(t, e)
	s := compute.AttentionSpec{B: 2, T: 64, C: 64, Heads: 2}
	n := s.B * s.T
	qkv, dout := b.vals(n*3*s.C, 1), b.vals(n*s.C, 1)
	f32, err := e.CausalAttention(s)
	require.NoError(t, err)
	s.DType = compute.BF16
	bfp, err := e.CausalAttention(s)
	require.NoError(t, err)
	assert.Contains(t, bfp.(interface{ Path() string }).Path(), "flash attention")
	fo, fd := e.Alloc(n, s.C), e.Alloc(n, 3*s.C)
	f32.Forward(fo, b.f32(qkv, n, 3*s.C))
	f32.Backward(fd, b.f32(dout, n, s.C), b.f32(qkv, n, 3*s.C))
	bq, bo, bd := b.bf(qkv, n, 3*s.C), e.AllocBF16(n, s.C), e.AllocBF16(n, 3*s.C)
	bfp.Forward(bo, bq)
	bfp.Backward(bd, b.bf(dout, n, s.C), bq)
	b.near("out", b.read(bo), b.read(fo), 1e-2)
	b.near("dqkv", b.read(bd), b.read(fd), 3e-2)
	require.NoError(t, e.Sync())
}

func TestBF16EmbeddingEmulated(t *testing.T) {
	testBF16Embedding(t, cudatest.NewEmulated(cuda.Options{}))
}
func TestBF16EmbeddingGPU(t *testing.T) { testBF16Embedding(t, gpuEngine(t)) }

// The embedding plan against Indexing's gathers and scatters: the tokens'
// gradient added to (a tied head's) or overwritten, the positions'
// overwritten.
func testBF16Embedding(t *testing.T, e *cuda.Engine) {
	b := newBF16Engine(t, e)
	const B, T, C, V = 2, 8, 16, 24
	n := B * T
	wte, wpe, dout := b.vals(V*C, 1), b.vals(T*C, 1), b.vals(n*C, 1)
	ids, pos := make([]int32, n), make([]int32, n)
	for i := range ids {
		ids[i], pos[i] = int32((i*7+3)%V), int32(i%T)
	}
	idl, posl := e.AllocLabels(n), e.AllocLabels(n)
	e.SetLabels(idl, ids)
	e.SetLabels(posl, pos)
	ref := e.Alloc(n, C)
	e.GatherRows(ref, b.f32(wte, V, C), idl, false)
	e.GatherRows(ref, b.f32(wpe, T, C), posl, true)
	rte, rpe := e.Alloc(V, C), e.Alloc(T, C)
	e.ScatterAddRows(rte, b.f32(dout, n, C), idl)
	e.ScatterAddRows(rpe, b.f32(dout, n, C), posl)
	for _, add := range []bool{false, true} {
		d0 := b.vals(V*C, 1)
		dte, dpe := b.f32(d0, V, C), b.f32(b.vals(T*C, 1), T, C)
		p, err := e.Embedding(compute.EmbeddingSpec{B: B, T: T, C: C, Vocab: V, DType: compute.BF16, AddTokens: add,
			Tokens: b.bf(wte, V, C), Positions: b.bf(wpe, T, C), DTokens: dte, DPositions: dpe})
		require.NoError(t, err)
		out := e.AllocBF16(n, C)
		p.Forward(out, idl)
		b.near("out", b.read(out), b.read(ref), 1e-2)
		p.Backward(b.bf(dout, n, C))
		want := b.read(rte)
		if add {
			for i := range want {
				want[i] += d0[i]
			}
		}
		b.near("token gradient", b.read(dte), want, 1e-5)
		b.near("position gradient", b.read(dpe), b.read(rpe), 1e-5)
	}
	// without a position table (a Llama's): the token's row alone, and its
	// gradient overwritten
	tokOnly := e.Alloc(n, C)
	e.GatherRows(tokOnly, b.f32(wte, V, C), idl, false)
	dte := b.f32(b.vals(V*C, 1), V, C)
	p, err := e.Embedding(compute.EmbeddingSpec{B: B, T: T, C: C, Vocab: V, DType: compute.BF16, Tokens: b.bf(wte, V, C), DTokens: dte})
	require.NoError(t, err)
	out := e.AllocBF16(n, C)
	p.Forward(out, idl)
	requireSameBits(t, "out without positions", b.read(out), b.read(tokOnly))
	p.Backward(b.bf(dout, n, C))
	b.near("token gradient without positions", b.read(dte), b.read(rte), 1e-5)
	_, err = e.Embedding(compute.EmbeddingSpec{B: B, T: T, C: C, Vocab: V})
	// llama3-1b at 12 sequences of 2048: logits of 24576 x 128256, past
	// 2^31 elements, which the classifier and cuBLASLt take
	require.NoError(t, e.CheckBF16(compute.CrossEntropySpec{Rows: 24576, Classes: 128256}))
	require.NoError(t, e.CheckBF16(compute.LinearSpec{Name: "lm_head", Batch: 24576, In: 2048, Out: 128256}))
	var missing *compute.MissingOpError
	require.ErrorAs(t, err, &missing, "no fp32 embedding plan")
}

func TestBF16CrossEntropyEmulated(t *testing.T) {
	testBF16CrossEntropy(t, cudatest.NewEmulated(cuda.Options{}))
}
func TestBF16CrossEntropyGPU(t *testing.T) { testBF16CrossEntropy(t, gpuEngine(t)) }

// The fused classifier against SoftmaxCrossEntropy: the gradient overwrites
// the logits; the stats count no correct predictions.
func testBF16CrossEntropy(t *testing.T, e *cuda.Engine) {
	b := newBF16Engine(t, e)
	const rows, v = 20, 32
	logits := b.vals(rows*v, 2)
	labels := make([]int32, rows)
	for i := range labels {
		labels[i] = int32((i * 5) % v)
	}
	labels[3] = -1
	l := e.AllocLabels(rows)
	e.SetLabels(l, labels)
	rd, rs := e.Alloc(rows, v), e.Alloc(3)
	e.SoftmaxCrossEntropy(b.f32(logits, rows, v), l, rd, 0.5, rs)
	p, err := e.CrossEntropy(compute.CrossEntropySpec{Rows: rows, Classes: v, DType: compute.BF16})
	require.NoError(t, err)
	bl, stats := b.bf(logits, rows, v), e.Alloc(3)
	require.Equal(t, bl, p.Apply(bl, l, 0.5, stats))
	b.near("gradient in place of the logits", b.read(bl), b.read(rd), 1e-2)
	got, want := b.read(stats), b.read(rs)
	assert.InDelta(t, want[0], got[0], 1e-4*float64(want[0]), "loss")
	assert.Equal(t, float32(0), got[1], "correct predictions are not counted")
	assert.Equal(t, want[2], got[2], "labelled rows")
}

// The bf16 copy of the masters: views at half the offsets, refreshed by one
// cast; a parameter that is not 8-element aligned is refused before
// anything is allocated.
func TestBF16MastersEmulated(t *testing.T) {
	e := cudatest.NewEmulated(cuda.Options{})
	b := newBF16Engine(t, e)
	arena := e.Alloc(40)
	a := compute.Arena{Dev: arena.(*cuda.Tensor).DevicePtr(), N: 40}
	p := []compute.Tensor{e.View(a, 8, 4, 4), e.View(a, 0, 8), e.View(a, 24, 16)}
	m, err := e.BF16Masters(p)
	require.NoError(t, err)
	vals := b.vals(40, 1)
	e.SetTensor(arena, vals)
	m.Cast()
	for i, v := range m.Views() {
		require.Equal(t, compute.BF16, v.DType())
		require.Equal(t, p[i].Shape(), v.Shape())
		require.Equal(t, b.read(p[i]), b.read(v), "parameter %d", i)
	}
	_, err = e.BF16Masters([]compute.Tensor{e.View(a, 0, 8), e.View(a, 12, 4)})
	require.ErrorIs(t, err, compute.ErrBF16Shape)
}

// What the bf16 kernels do not take is refused at build time, wrapping
// compute.ErrBF16Shape, and what the engine has no bf16 form of is a
// *compute.MissingOpError; the CPU engine has none at all.
func TestCheckBF16(t *testing.T) {
	e := cudatest.NewEmulated(cuda.Options{})
	for _, s := range []compute.OpSpec{
		compute.LinearSpec{Batch: 64, In: 64, Out: 192},
		compute.NormSpec{Rows: 64, Cols: 64, Eps: 1e-5},
		compute.AttentionSpec{B: 2, T: 128, C: 128, Heads: 2},
		compute.EmbeddingSpec{B: 2, T: 64, C: 64, Vocab: 256},
		compute.CrossEntropySpec{Rows: 128, Classes: 256},
		compute.RMSNormSpec{Rows: 7, Cols: 13, Eps: 1e-6},
		compute.SwiGLUSpec{Rows: 5, Cols: 3},
		compute.RotarySpec{T: 3, HeadSize: 6, Theta: 10},
		compute.GroupedAttentionSpec{B: 2, T: 128, Heads: 12, KVHeads: 4, HeadSize: 64},
	} {
		require.NoError(t, e.CheckBF16(s), "%+v", s)
	}
	for _, s := range []compute.OpSpec{compute.RMSNormSpec{Rows: 0, Cols: 8, Eps: 1e-5}, compute.SwiGLUSpec{}, compute.RotarySpec{T: 3, HeadSize: 5, Theta: 10}} {
		require.Error(t, e.CheckBF16(s), "%+v", s)
	}
	for _, tc := range []struct {
		s    compute.OpSpec
		want string
	}{
		{compute.LinearSpec{Name: "fc", Batch: 64, In: 60, Out: 192}, "from 60 to 192 features: the bf16 GEMMs need multiples of 8"},
		{compute.NormSpec{Rows: 64, Cols: 64, Eps: 1e-6}, "eps 1e-06"},
		{compute.NormSpec{Rows: 64, Cols: 20, Eps: 1e-5}, "width 20"},
		{compute.AttentionSpec{B: 2, T: 128, C: 64, Heads: 4}, "head size of 32 or 64"},
		{compute.AttentionSpec{B: 2, T: 100, C: 64, Heads: 2}, "context 100"},
		{compute.CrossEntropySpec{Rows: 128, Classes: 250}, "vocabulary 250"},
		{compute.CrossEntropySpec{Rows: 1 << 31, Classes: 8}, "32-bit indices"},
		{compute.LinearSpec{Name: "head", Batch: 64, In: 64, Out: 1 << 31}, "32-bit indices"},
		{compute.GroupedAttentionSpec{B: 2, T: 128, Heads: 4, KVHeads: 2, HeadSize: 16}, "head size 16"},
		{compute.GroupedAttentionSpec{B: 2, T: 96, Heads: 4, KVHeads: 2, HeadSize: 32}, "context 96"},
	} {
		err := e.CheckBF16(tc.s)
		require.ErrorIs(t, err, compute.ErrBF16Shape, "%+v", tc.s)
		assert.Contains(t, err.Error(), tc.want)
	}
	var missing *compute.MissingOpError
	err := e.CheckBF16(compute.LinearSpec{Batch: 64, In: 64, Out: 64, Act: compute.ReLU})
	require.True(t, errors.As(err, &missing), "%v", err)
	assert.Equal(t, "engine cuda/cublas has no bf16 Linear with ReLU (compute.BF16Tensors)", err.Error())
	ce, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	err = compute.CheckBF16(ce, compute.NormSpec{Rows: 64, Cols: 64, Eps: 1e-5})
	require.True(t, errors.As(err, &missing), "%v", err)
	assert.Equal(t, "engine "+ce.Name()+" has no bf16 layer norm (compute.BF16Tensors)", err.Error())
}

func TestMastersWrittenByUpdateEmulated(t *testing.T) {
	testMastersWrittenByUpdate(t, cudatest.NewEmulated(cuda.Options{}))
}
func TestMastersWrittenByUpdateGPU(t *testing.T) { testMastersWrittenByUpdate(t, gpuEngine(t)) }

// An Update over the whole arena writes the bf16 copy of the masters with
// the parameters, so that Cast has nothing to do (the copy after Update is
// the cast of the updated parameters, bit for bit); a skipped step leaves
// it current; a copy that the update did not write (parameters written by
// SetTensor, a shard's update) is cast again once ParamsWritten says so,
// or always for the shard's.
func testMastersWrittenByUpdate(t *testing.T, e *cuda.Engine) {
	const n = 72 // the copy covers [8, 64): elements outside it have none
	b := newBF16Engine(t, e)
	arena := e.Alloc(n)
	grads := e.Alloc(n)
	a := compute.Arena{Dev: arena.(*cuda.Tensor).DevicePtr(), N: n}
	p := []compute.Tensor{e.View(a, 8, 8, 4), e.View(a, 40, 24)}
	m, err := e.BF16Masters(p)
	require.NoError(t, err)
	o, err := optim.NewAdamW(optim.DefaultAdamWConfig())
	require.NoError(t, err)
	// copyOfIs wants every copy of c to hold its master rounded (want) or not
	copyOfIs := func(c compute.Masters, what string, want bool) {
		t.Helper()
		require.NoError(t, e.Sync())
		for i, v := range c.Views() {
			master, copied := b.read(p[i]), b.read(v)
			same := true
			for j := range master {
				same = same && math.Float32bits(copied[j]) == math.Float32bits(bf16Round(master[j]))
			}
			require.Equal(t, want, same, "%s: parameter %d's copy is its master rounded", what, i)
		}
	}
	copyIs := func(what string, want bool) { t.Helper(); copyOfIs(m, what, want) }
	e.SetTensor(arena, b.vals(n, 1))
	m.Cast()
	copyIs("first cast", true)
	for step := 1; step <= 3; step++ {
		g := b.vals(n, 1)
		if step == 2 {
			g[50] = float32(math.NaN()) // skipped
		}
		e.SetTensor(grads, g)
		require.NoError(t, e.Update(o, arena, grads, step, 0.01, 0))
		copyIs(fmt.Sprintf("step %d's update", step), true)
		m.Cast() // nothing to do
		copyIs(fmt.Sprintf("step %d's cast", step), true)
	}
	// written other than by Update: the copy is stale until ParamsWritten
	e.SetTensor(grads, b.vals(n, 1))
	require.NoError(t, e.Update(o, arena, grads, 4, 0.01, 0)) // the word set
	e.SetTensor(arena, b.vals(n, 1))
	m.Cast()
	copyIs("cast after SetTensor without ParamsWritten", false)
	e.ParamsWritten()
	m.Cast()
	copyIs("cast after ParamsWritten", true)
	// a shard's update writes no copy and sets no word: Cast casts
	parts := e.Alloc(2)
	e.SetTensor(grads, b.vals(n, 1))
	e.SumSquaresInto(parts, grads)
	require.NoError(t, e.UpdateShard(o, arena, grads, 0, parts, 1, 0, 5, 0.01, 0))
	copyIs("after a shard's update", false)
	m.Cast()
	copyIs("cast after a shard's update", true)
	// a second copy of the same parameters (a model built again over this
	// arena): the update writes the newest one; the older casts for itself
	m2, err := e.BF16Masters(p)
	require.NoError(t, err)
	m2.Cast()
	require.NoError(t, e.Update(o, arena, grads, 6, 0.01, 0))
	copyOfIs(m2, "the newer copy after an update", true)
	copyIs("the older copy after an update", false)
	m.Cast()
	copyIs("the older copy's cast", true)
}

// bf16Round is v rounded to bf16 (to nearest even, as the kernels round)
// and widened back.
func bf16Round(v float32) float32 {
	u := math.Float32bits(v)
	u += 0x7fff + (u>>16)&1
	return math.Float32frombits(u &^ 0xffff)
}
