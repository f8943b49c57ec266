package cuda_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/internal/cudalib"
)

// A Llama block's elementwise and row operations in bf16 (RMSNorm, SwiGLU,
// the rotary embedding: the sdc_* kernels' bf16 forms) against the same
// engine's fp32 operations on the same bf16-exact values, within bf16's
// rounding; and, on a GPU, the kernels' bits against the emulated device's.

// llamaBF16Case is one bf16 operation run on an engine: run enqueues it on
// inputs made from vals (the same values on every engine), outs are what
// it writes.
type llamaBF16Case struct {
	what string
	make func(b *bf16Engine, vals func(n int, sd float64) []float32) (run func(), outs []compute.Tensor)
}

// rmsNormShapes are rows x width: widths below, at and past a multiple of
// eight and of a warp, and Llama's.
var rmsNormShapes = [][2]int{{1, 1}, {3, 5}, {37, 8}, {33, 13}, {9, 40}, {130, 128}, {5, 771}, {4, 2048}, {300, 64}, {6, 768}, {17, 520}, {8300, 40}}

// swiGLUShapes are rows x F: widths off and on whole 16-byte words (of
// bf16 and of fp32), and enough elements for a grid of many blocks.
var swiGLUShapes = [][2]int{{1, 1}, {1, 7}, {3, 4}, {5, 200}, {3, 1003}, {7, 1000}, {6, 8192}}

// llamaBF16Cases are the cases of both tests: each returns its bf16
// outputs and, for the fp32 comparison, the fp32 reference of each with
// the tolerance (of the reference's largest magnitude) it is held to.
func llamaBF16Cases() []llamaBF16Case {
	var cs []llamaBF16Case
	for _, sh := range rmsNormShapes {
		rows, c := sh[0], sh[1]
		for _, add := range []bool{false, true} {
			cs = append(cs, llamaBF16Case{fmt.Sprintf("RMSNorm %dx%d addDX %v", rows, c, add),
				func(b *bf16Engine, vals func(int, float64) []float32) (func(), []compute.Tensor) {
					e := b.e
					x, w, dy, d0 := vals(rows*c, 2), vals(c, 1), vals(rows*c, 1), vals(rows*c, 1)
					bx, bw, bdy := b.bf(x, rows, c), b.bf(w, c), b.bf(dy, rows, c)
					y, rstd, dx, dw := e.AllocBF16(rows, c), e.Alloc(rows), b.bf(d0, rows, c), e.Alloc(c)
					return func() {
						e.RMSNorm(y, rstd, bx, bw, 1e-5)
						e.RMSNormBackward(dx, dw, bdy, bx, bw, rstd, add)
					}, []compute.Tensor{y, rstd, dx, dw}
				}})
		}
	}
	for _, sh := range swiGLUShapes {
		rows, f := sh[0], sh[1]
		cs = append(cs, llamaBF16Case{fmt.Sprintf("SwiGLU %dx%d", rows, f),
			func(b *bf16Engine, vals func(int, float64) []float32) (func(), []compute.Tensor) {
				e := b.e
				ab, dy := vals(2*rows*f, 3), vals(rows*f, 1)
				bab, bdy := b.bf(ab, rows, 2*f), b.bf(dy, rows, f)
				y, dab := e.AllocBF16(rows, f), e.AllocBF16(rows, 2*f)
				return func() {
					e.SwiGLU(y, bab)
					e.SwiGLUBackward(dab, bdy, bab)
				}, []compute.Tensor{y, dab}
			}})
	}
	for _, r := range []struct {
		rows, heads, ld, hs, T int
		theta                  float64
	}{{6, 1, 8, 8, 3, 10000}, {4 * 33, 4, 24, 6, 33, 10}, {2 * 128, 1, 64, 64, 128, 5e5},
		{2 * 128, 3, 320, 64, 128, 5e5}, {3 * 5, 2, 14, 6, 5, 10}} {
		cs = append(cs, llamaBF16Case{fmt.Sprintf("rotary %+v", r),
			func(b *bf16Engine, vals func(int, float64) []float32) (func(), []compute.Tensor) {
				e := b.e
				p, err := e.RotaryEmbedding(compute.RotarySpec{T: r.T, HeadSize: r.hs, Theta: r.theta})
				require.NoError(b.t, err)
				x, dy := vals(r.rows*r.ld, 2), vals(r.rows*r.ld, 1)
				bx, bdy := b.bf(x, r.rows, r.ld), b.bf(dy, r.rows, r.ld)
				return func() {
					p.Forward(bx, r.heads)
					p.Backward(bdy, r.heads)
				}, []compute.Tensor{bx, bdy}
			}})
	}
	return cs
}

func TestBF16LlamaOpsEmulated(t *testing.T) {
	testBF16LlamaOps(t, cudatest.NewEmulated(cuda.Options{}))
}
func TestBF16LlamaOpsGPU(t *testing.T) { testBF16LlamaOps(t, gpuEngine(t)) }

// The bf16 forms against the fp32 operations of the same engine on the
// same values: y, dx, da, db and the rotations within 1-2% (bf16 keeps 8
// bits), rstd and dw (fp32, summed from bf16 inputs that are exact) within
// 1e-5 and 1e-4. dx with addDX is the fp32 gradient plus the bf16 dx it
// was added to.
func testBF16LlamaOps(t *testing.T, e *cuda.Engine) {
	b := newBF16Engine(t, e)
	for _, sh := range rmsNormShapes {
		rows, c := sh[0], sh[1]
		x, w, dy, d0 := b.vals(rows*c, 2), b.vals(c, 1), b.vals(rows*c, 1), b.vals(rows*c, 1)
		fy, fr := e.Alloc(rows, c), e.Alloc(rows)
		fx, fw := b.f32(x, rows, c), b.f32(w, c)
		e.RMSNorm(fy, fr, fx, fw, 1e-5)
		fdx, fdw := e.Alloc(rows, c), e.Alloc(c)
		e.RMSNormBackward(fdx, fdw, b.f32(dy, rows, c), fx, fw, fr, false)
		for _, add := range []bool{false, true} {
			what := fmt.Sprintf("RMSNorm %dx%d addDX %v", rows, c, add)
			y, rstd, dx, dw := e.AllocBF16(rows, c), e.Alloc(rows), b.bf(d0, rows, c), e.Alloc(c)
			bx, bw := b.bf(x, rows, c), b.bf(w, c)
			e.RMSNorm(y, rstd, bx, bw, 1e-5)
			e.RMSNormBackward(dx, dw, b.bf(dy, rows, c), bx, bw, rstd, add)
			b.near(what+": y", b.read(y), b.read(fy), 1e-2)
			b.near(what+": rstd", b.read(rstd), b.read(fr), 1e-6)
			want := b.read(fdx)
			if add {
				for i := range want {
					want[i] += d0[i]
				}
			}
			b.near(what+": dx", b.read(dx), want, 2e-2)
			b.near(what+": dw", b.read(dw), b.read(fdw), 1e-4)
		}
	}
	for _, sh := range swiGLUShapes {
		rows, f := sh[0], sh[1]
		what := fmt.Sprintf("SwiGLU %dx%d", rows, f)
		ab, dy := b.vals(2*rows*f, 3), b.vals(rows*f, 1)
		fy, fdab := e.Alloc(rows, f), e.Alloc(rows, 2*f)
		e.SwiGLU(fy, b.f32(ab, rows, 2*f))
		e.SwiGLUBackward(fdab, b.f32(dy, rows, f), b.f32(ab, rows, 2*f))
		bab := b.bf(ab, rows, 2*f)
		y, dab := e.AllocBF16(rows, f), e.AllocBF16(rows, 2*f)
		e.SwiGLU(y, bab)
		e.SwiGLUBackward(dab, b.bf(dy, rows, f), bab)
		b.near(what+": y", b.read(y), b.read(fy), 1e-2)
		b.near(what+": [da | db]", b.read(dab), b.read(fdab), 1e-2)
	}
	for _, r := range []compute.RotarySpec{{T: 3, HeadSize: 8, Theta: 1e4}, {T: 33, HeadSize: 6, Theta: 10}, {T: 128, HeadSize: 64, Theta: 5e5}} {
		what := fmt.Sprintf("rotary %+v", r)
		rows, ld, heads := 2*r.T, 5*r.HeadSize, 3 // three heads of five rotated, as a packed qkv's queries and keys
		p, err := e.RotaryEmbedding(r)
		require.NoError(t, err)
		x := b.vals(rows*ld, 2)
		fy, fx := b.f32(x, rows, ld), b.f32(x, rows, ld)
		p.Forward(fy, heads)
		p.Backward(fx, heads)
		y, dx := b.bf(x, rows, ld), b.bf(x, rows, ld)
		p.Backward(dx, heads)
		p.Forward(y, heads)
		b.near(what+": forward", b.read(y), b.read(fy), 1e-2)
		b.near(what+": backward", b.read(dx), b.read(fx), 1e-2)
		for i, v := range b.read(y) {
			if i%ld >= heads*r.HeadSize && v != x[i] {
				t.Fatalf("%s: column %d of a row past the rotated heads changed", what, i%ld)
			}
		}
	}
	require.NoError(t, e.Sync())
}

// The bf16 kernels do, operation for operation, what the emulated device
// does (compute/cuda/cudatest: the same float32 operations in the same
// order, each stored result rounded to bf16 once): the same bits, eager
// and replayed from a graph. Not run without a GPU; emulated, the same
// cases replayed from a graph give the eager bits.
func TestBF16LlamaOpsBitsGPU(t *testing.T) {
	sameBF16Bits(t, cudatest.NewEmulated(cuda.Options{}), gpuEngine(t))
}
func TestBF16LlamaOpsReplayEmulated(t *testing.T) {
	sameBF16Bits(t, cudatest.NewEmulated(cuda.Options{}), cudatest.NewEmulated(cuda.Options{}))
}

// sameBF16Bits runs every llamaBF16Cases case eagerly on ref and eagerly
// and from a graph on e, on the same values, and wants the same bits.
func sameBF16Bits(t *testing.T, ref, e *cuda.Engine) {
	for _, c := range llamaBF16Cases() {
		var want [][]float32
		for i, graph := range []bool{false, false, true} {
			en := e
			if i == 0 {
				en = ref
			}
			b := newBF16Engine(t, en)
			run, outs := c.make(b, newBF16Engine(t, ref).vals) // the same values every run
			runOn(t, en, graph, run)
			got := make([][]float32, len(outs))
			for j, o := range outs {
				got[j] = b.read(o)
			}
			require.NoError(t, en.Sync())
			if i == 0 {
				want = got
				continue
			}
			for j := range got {
				for m := range got[j] {
					if !sameBits(got[j][m], want[j][m]) {
						t.Fatalf("%s (graph %v): output %d, element %d: %v, the reference's %v", c.what, graph, j, m, got[j][m], want[j][m])
					}
				}
			}
		}
	}
}

func TestBF16GroupedAttentionEmulated(t *testing.T) {
	testBF16GroupedAttention(t, cudatest.NewEmulated(cuda.Options{}))
}
func TestBF16GroupedAttentionGPU(t *testing.T) { testBF16GroupedAttention(t, gpuEngine(t)) }

// The bf16 grouped plan against the fp32 one on the same values (both
// kernel families: wmma at head size 32, mma.sync at 64 over 128
// positions; groups of 1, 2 and 4 query heads); and with KVHeads = Heads
// it is the GPT's bf16 attention on the same packed qkv: the same kernels
// on the same numbers, so the same bits as the packed plan. The packed plan
// must then run our kernels too, as must the grouped one: on a GPU whose
// library has cuDNN both would take cuDNN's fused attention, so
// SYMDDP_ATTENTION asks for ours (TestBF16GroupedAttentionCUDNNGPU checks
// cuDNN's).
func testBF16GroupedAttention(t *testing.T, e *cuda.Engine) {
	t.Setenv("SYMDDP_ATTENTION", "own")
	b := newBF16Engine(t, e)
	for _, s := range []compute.GroupedAttentionSpec{
		{B: 2, T: 64, Heads: 4, KVHeads: 2, HeadSize: 32},
		{B: 1, T: 128, Heads: 4, KVHeads: 1, HeadSize: 64},
		{B: 2, T: 64, Heads: 2, KVHeads: 2, HeadSize: 64},
	} {
		what := fmt.Sprintf("%+v", s)
		n, qw := s.B*s.T, s.Heads*s.HeadSize
		bs := s
		bs.DType = compute.BF16
		p, err := e.GroupedCausalAttention(bs)
		require.NoError(t, err)
		require.Contains(t, p.(interface{ Path() string }).Path(), "grouped flash attention")
		run := checkGroupedBF16(t, b, s, p)
		if s.KVHeads != s.Heads {
			continue
		}
		// with a key/value head a query head, the packed layout is GPT-2's
		mh, err := e.CausalAttention(compute.AttentionSpec{B: s.B, T: s.T, C: qw, Heads: s.Heads, DType: compute.BF16})
		require.NoError(t, err)
		require.NotContains(t, mh.(interface{ Path() string }).Path(), "cuDNN", "SYMDDP_ATTENTION=own")
		bqkv, po, pd := b.bf(run.qkv, n, 3*qw), e.AllocBF16(n, qw), e.AllocBF16(n, 3*qw)
		mh.Forward(po, bqkv)
		mh.Backward(pd, b.bf(run.dout, n, qw), bqkv)
		requireSameBits(t, what+": out against the packed plan", b.read(run.out), b.read(po))
		requireSameBits(t, what+": dqkv against the packed plan's", b.read(run.dqkv), b.read(pd))
	}
	require.NoError(t, e.Sync())
}

// groupedRun is what checkGroupedBF16 ran: the values, the bf16 plan's
// outputs, and its backward again on the same tensors.
type groupedRun struct {
	qkv, dout []float32
	out, dqkv compute.Tensor
	backward  func()
}

// checkGroupedBF16 runs the bf16 plan p of s (an fp32 spec) forward and
// backward on fresh bf16-exact values and checks out and dqkv against the
// engine's fp32 plan on the same values, within bf16's rounding.
func checkGroupedBF16(t *testing.T, b *bf16Engine, s compute.GroupedAttentionSpec, p compute.GroupedAttentionPlan) groupedRun {
	t.Helper()
	e, what := b.e, fmt.Sprintf("%+v", s)
	n, qw, w := s.B*s.T, s.Heads*s.HeadSize, s.Width()
	r := groupedRun{qkv: b.vals(n*w, 1), dout: b.vals(n*qw, 1)}
	f32, err := e.GroupedCausalAttention(s)
	require.NoError(t, err)
	fo, fd, fq := e.Alloc(s.B, s.T, qw), e.Alloc(s.B, s.T, w), b.f32(r.qkv, s.B, s.T, w)
	f32.Forward(fo, fq)
	f32.Backward(fd, b.f32(r.dout, s.B, s.T, qw), fq)
	bq, bdo := b.bf(r.qkv, s.B, s.T, w), b.bf(r.dout, s.B, s.T, qw)
	r.out, r.dqkv = e.AllocBF16(s.B, s.T, qw), e.AllocBF16(s.B, s.T, w)
	r.backward = func() { p.Backward(r.dqkv, bdo, bq) }
	p.Forward(r.out, bq)
	r.backward()
	b.near(what+": out", b.read(r.out), b.read(fo), 1e-2)
	b.near(what+": dqkv", b.read(r.dqkv), b.read(fd), 3e-2)
	return r
}

// cudnnGroupedDevice is the emulated device as a library whose cuDNN plans
// build for grouped attention would answer (the emulated one has no
// cuDNN): what the grouped plan's description follows.
type cudnnGroupedDevice struct {
	*cudatest.Device
	asked []int
}

func (d *cudnnGroupedDevice) GroupedAttentionBF16Supported(impl cudalib.AttentionImpl, b, t, nh, kvh, hs int) (bool, error) {
	if impl != cudalib.AttentionCUDNN {
		return d.Device.GroupedAttentionBF16Supported(impl, b, t, nh, kvh, hs)
	}
	d.asked = []int{b, t, nh, kvh, hs}
	return true, nil
}

// The bf16 grouped plan says it runs cuDNN's fused attention where the
// library's cuDNN plans build at its shape (SDC_ATTN_AUTO's rule, as the
// packed plan's), unless SYMDDP_ATTENTION asks for ours; on the emulated
// device (no cuDNN) ours.
func TestBF16GroupedAttentionPath(t *testing.T) {
	s := compute.GroupedAttentionSpec{B: 2, T: 128, Heads: 4, KVHeads: 2, HeadSize: 64, DType: compute.BF16}
	for _, tc := range []struct{ env, want string }{
		{"", "grouped flash attention (cuDNN)"},
		{"cudnn", "grouped flash attention (cuDNN)"},
		{"own", "grouped flash attention (mma.sync)"},
	} {
		t.Setenv("SYMDDP_ATTENTION", tc.env)
		d := &cudnnGroupedDevice{Device: cudatest.NewDevice()}
		p, err := cuda.NewOnDevice(d, cuda.Options{}).GroupedCausalAttention(s)
		require.NoError(t, err, tc.env)
		assert.Equal(t, tc.want, p.(interface{ Path() string }).Path(), "SYMDDP_ATTENTION=%q", tc.env)
		if tc.env == "own" {
			assert.Nil(t, d.asked, "SYMDDP_ATTENTION=own does not ask")
		} else {
			assert.Equal(t, []int{2, 128, 4, 2, 64}, d.asked, "asked about the plan's shape")
		}
	}
	t.Setenv("SYMDDP_ATTENTION", "")
	d := cudatest.NewDevice()
	e := cuda.NewOnDevice(d, cuda.Options{})
	for _, c := range []struct {
		s    compute.GroupedAttentionSpec
		want string
	}{{s, "grouped flash attention (mma.sync)"},
		{compute.GroupedAttentionSpec{B: 2, T: 64, Heads: 4, KVHeads: 2, HeadSize: 32, DType: compute.BF16}, "grouped flash attention (wmma)"}} {
		p, err := e.GroupedCausalAttention(c.s)
		require.NoError(t, err)
		assert.Equal(t, c.want, p.(interface{ Path() string }).Path())
		ok, err := d.GroupedAttentionBF16Supported(cudalib.AttentionCUDNN, c.s.B, c.s.T, c.s.Heads, c.s.KVHeads, c.s.HeadSize)
		require.NoError(t, err)
		assert.False(t, ok, "the emulated library has no cuDNN")
	}
}

// On a GPU whose library has cuDNN: cuDNN's grouped attention (its graphs
// reading K and V with their KVH heads, dK and dV reduced over each group)
// against the fp32 plan on the same values, within bf16's rounding, at
// Llama's head size and at 32, groups of 2 and 4 (and 1: multi-head on
// GPT-2's packed layout); its backward's bits repeat from call to call (the det
// form). Skips where the library has no cuDNN.
func TestBF16GroupedAttentionCUDNNGPU(t *testing.T) {
	e := gpuEngine(t)
	t.Setenv("SYMDDP_ATTENTION", "")
	b := newBF16Engine(t, e)
	for _, s := range []compute.GroupedAttentionSpec{
		{B: 2, T: 256, Heads: 12, KVHeads: 4, HeadSize: 64},
		{B: 2, T: 128, Heads: 4, KVHeads: 1, HeadSize: 64},
		{B: 2, T: 64, Heads: 4, KVHeads: 2, HeadSize: 32},
		{B: 1, T: 128, Heads: 2, KVHeads: 2, HeadSize: 64},
	} {
		what := fmt.Sprintf("%+v", s)
		bs := s
		bs.DType = compute.BF16
		p, err := e.GroupedCausalAttention(bs)
		require.NoError(t, err)
		if path := p.(interface{ Path() string }).Path(); path != "grouped flash attention (cuDNN)" {
			t.Skipf("%s: %s: no cuDNN plan for grouped attention in this library (built without cuDNN, or cuDNN refused the graph: SYMDDP_CUDNN_LOG=1 says why)", what, path)
		}
		r := checkGroupedBF16(t, b, s, p)
		first := b.read(r.dqkv)
		r.backward()
		requireSameBits(t, what+": dqkv, second backward against the first", b.read(r.dqkv), first)
	}
	require.NoError(t, e.Sync())
}

// requireSameBits fails unless got and want are the same float32 bits.
func requireSameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}
