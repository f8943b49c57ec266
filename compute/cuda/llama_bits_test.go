package cuda_test

import (
	"fmt"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
)

// The RMSNorm kernels do the CPU engine's float32 operations in its order
// (dot8's lanes and tail, dw in row order): the same bits, eager and
// replayed, for widths below, at and past a multiple of eight.
func TestRMSNormMatchesCPUGPU(t *testing.T) { testRMSNormMatchesCPU(t, gpuEngine(t)) }
func TestRMSNormMatchesCPUEmulated(t *testing.T) {
	testRMSNormMatchesCPU(t, cudatest.NewEmulated(cuda.Options{}))
}

func testRMSNormMatchesCPU(t *testing.T, e *cuda.Engine) {
	for _, sh := range [][2]int{{1, 1}, {3, 5}, {37, 8}, {33, 13}, {130, 128}, {5, 771}} {
		rows, c := sh[0], sh[1]
		for _, add := range []bool{false, true} {
			sameBitsAsCPU(t, e, fmt.Sprintf("RMSNorm %dx%d, addDX %v", rows, c, add), func(en compute.Engine) (func(), []compute.Tensor) {
				nm := en.(compute.RMSNorms)
				x, w := filled(en, 1, 3, 0.5, rows, c), filled(en, 2, 1, 1, c)
				dy := filled(en, 4, 1, 0, rows, c)
				y, rstd := filled(en, 0, 0, 0, rows, c), filled(en, 0, 0, 0, rows)
				dx := filled(en, 0, 0, 0, rows, c)
				if add {
					dx = filled(en, 5, 1, 0, rows, c)
				}
				dw := filled(en, 0, 0, 0, c)
				return func() {
					nm.RMSNorm(y, rstd, x, w, 1e-5)
					nm.RMSNormBackward(dx, dw, dy, x, w, rstd, add)
				}, []compute.Tensor{y, rstd, dx, dw}
			})
		}
	}
}

// The SwiGLU kernels do hostloops' float32 operations with its exp32: the
// same bits, eager and replayed, with inputs past exp32's clamp, over rows
// whose halves are and are not whole 16-byte words.
func TestSwiGLUMatchesCPUGPU(t *testing.T) { testSwiGLUMatchesCPU(t, gpuEngine(t)) }
func TestSwiGLUMatchesCPUEmulated(t *testing.T) {
	testSwiGLUMatchesCPU(t, cudatest.NewEmulated(cuda.Options{}))
}

func testSwiGLUMatchesCPU(t *testing.T, e *cuda.Engine) {
	for _, sh := range append(swiGLUShapes, [2]int{48, 4096}) {
		rows, f := sh[0], sh[1]
		sameBitsAsCPU(t, e, fmt.Sprintf("SwiGLU %dx%d", rows, f), func(en compute.Engine) (func(), []compute.Tensor) {
			sg := en.(compute.SwiGLUs)
			ab := filled(en, 1, 30, 0, rows, 2*f) // |a| past 88 now and then
			y, dab := filled(en, 0, 0, 0, rows, f), filled(en, 0, 0, 0, rows, 2*f)
			dy := filled(en, 3, 1, 0, rows, f)
			return func() {
				sg.SwiGLU(y, ab)
				sg.SwiGLUBackward(dab, dy, ab)
			}, []compute.Tensor{y, dab}
		})
	}
}

// The rotation does hostloops' float32 operations over the CPU engine's
// table: the same bits, eager and replayed, forward and backward, for one
// and several heads, rows wider than the heads turned (a packed qkv's),
// an odd half head and T = 1.
func TestRotaryMatchesCPUGPU(t *testing.T) { testRotaryMatchesCPU(t, gpuEngine(t)) }
func TestRotaryMatchesCPUEmulated(t *testing.T) {
	testRotaryMatchesCPU(t, cudatest.NewEmulated(cuda.Options{}))
}

func testRotaryMatchesCPU(t *testing.T, e *cuda.Engine) {
	for _, c := range []struct {
		rows, heads, ld, hs, T int
		theta                  float64
	}{
		{1, 1, 2, 2, 1, 10000},
		{6, 1, 8, 8, 3, 10000},
		{2 * 70, 3, 48, 16, 70, 5e5},
		{4 * 33, 4, 24, 6, 33, 10},
		{2 * 128, 1, 64, 64, 128, 5e5},
		{2 * 128, 16, 1280, 64, 128, 5e5}, // llama-124m's packed qkv: 12 query and 4 key heads of 20
		{3 * 5, 2, 14, 6, 5, 10},          // rows of an odd stride
	} {
		sameBitsAsCPU(t, e, fmt.Sprintf("rotary %+v", c), func(en compute.Engine) (func(), []compute.Tensor) {
			p, err := en.(compute.Rotary).RotaryEmbedding(compute.RotarySpec{T: c.T, HeadSize: c.hs, Theta: c.theta})
			if err != nil {
				t.Fatal(err)
			}
			x, dy := filled(en, 1, 2, 0, c.rows, c.ld), filled(en, 2, 1, 0, c.rows, c.ld)
			return func() {
				p.Forward(x, c.heads)
				p.Backward(dy, c.heads)
			}, []compute.Tensor{x, dy}
		})
	}
}

// Grouped attention's sums are the flash kernel's at head sizes up to 64
// and cuBLAS's products above (the GEMM plan), not the CPU engine's, so
// its bits are its own, but they are the same on every run: eagerly twice
// and replayed from a graph, head sizes on both sides of 64, both layouts
// of the GEMM plan's batches (per sequence and group member when B <=
// KVHeads, per query head otherwise), and a key/value head's gradients
// summed over its group.
func TestGroupedAttentionRepeatsGPU(t *testing.T) { testGroupedAttentionRepeats(t, gpuEngine(t)) }
func TestGroupedAttentionRepeatsEmulated(t *testing.T) {
	testGroupedAttentionRepeats(t, cudatest.NewEmulated(cuda.Options{}))
}

func testGroupedAttentionRepeats(t *testing.T, e *cuda.Engine) {
	for _, s := range []compute.GroupedAttentionSpec{
		{B: 2, T: 70, Heads: 6, KVHeads: 2, HeadSize: 8},
		{B: 3, T: 33, Heads: 4, KVHeads: 1, HeadSize: 16},
		{B: 2, T: 20, Heads: 4, KVHeads: 2, HeadSize: 72},
		{B: 3, T: 9, Heads: 4, KVHeads: 1, HeadSize: 65},
	} {
		qw, w := s.Heads*s.HeadSize, s.Width()
		var want [][]float32
		for i, graph := range []bool{false, false, true} {
			p, err := e.GroupedCausalAttention(s)
			if err != nil {
				t.Fatal(err)
			}
			qkv, dout := filled(e, 1, 1, 0, s.B, s.T, w), filled(e, 4, 1, 0, s.B, s.T, qw)
			out, dqkv := filled(e, 0, 0, 0, s.B, s.T, qw), filled(e, 0, 0, 0, s.B, s.T, w)
			runOn(t, e, graph, func() {
				p.Forward(out, qkv)
				p.Backward(dqkv, dout, qkv)
			})
			got := make([][]float32, 2)
			for j, o := range []compute.Tensor{out, dqkv} {
				got[j] = make([]float32, o.Size())
				e.ReadTensor(got[j], o)
			}
			if i == 0 {
				want = got
				continue
			}
			for j := range got {
				for m := range got[j] {
					if !sameBits(got[j][m], want[j][m]) || got[j][m] != got[j][m] {
						t.Fatalf("grouped attention %+v, run %d (graph %v): output %d, element %d: %v, the first run's %v",
							s, i+1, graph, j, m, got[j][m], want[j][m])
					}
				}
			}
		}
	}
}
