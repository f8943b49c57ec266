package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
)

// A bitsCase sets up operations on an engine: it allocates and fills their
// inputs (the same values on every engine) and returns run, which enqueues
// the operations, and the tensors whose values they leave.
type bitsCase func(en compute.Engine) (run func(), outs []compute.Tensor)

// sameBitsAsCPU runs c on the CPU engine and on e, eagerly and replayed
// from a CUDA graph, and fails t at the first output element of e whose
// bits differ from the CPU engine's (NaN matching any NaN): for the
// kernels that do the CPU engine's float32 operations in its order.
func sameBitsAsCPU(t *testing.T, e *cuda.Engine, what string, c bitsCase) {
	t.Helper()
	ce, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	read := func(en compute.Engine, outs []compute.Tensor) [][]float32 {
		t.Helper()
		vals := make([][]float32, len(outs))
		for i, o := range outs {
			vals[i] = make([]float32, o.Size())
			en.ReadTensor(vals[i], o)
		}
		if err := en.Sync(); err != nil {
			t.Fatal(err)
		}
		return vals
	}
	run, outs := c(ce)
	run()
	want := read(ce, outs)
	for _, graph := range []bool{false, true} {
		run, outs := c(e)
		runOn(t, e, graph, run)
		for i, got := range read(e, outs) {
			for j := range got {
				if !sameBits(got[j], want[i][j]) {
					t.Fatalf("%s (graph %v): output %d, element %d of %d: %v, the CPU engine's %v", what, graph, i, j, len(got), got[j], want[i][j])
				}
			}
		}
	}
}

// runOn enqueues run's work on e: eagerly, or (graph) recorded into a
// CUDA graph that is then launched once (and closed when t ends).
func runOn(t *testing.T, e *cuda.Engine, graph bool, run func()) {
	t.Helper()
	if !graph {
		run()
		return
	}
	if err := e.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	run()
	g, err := e.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	if err := g.Launch(cuda.StepValues{}); err != nil {
		t.Fatal(err)
	}
}

// filled allocates a tensor of shape on en holding values drawn from a
// generator seeded with seed (the same on every engine), scaled by scale
// and shifted by shift; scale 0 gives NaNs, for outputs that must be
// overwritten.
func filled(en compute.Engine, seed uint64, scale, shift float64, shape ...int) compute.Tensor {
	t := en.Alloc(shape...)
	r := rand.New(rand.NewPCG(seed, 99))
	v := make([]float32, t.Size())
	for i := range v {
		v[i] = float32(math.NaN())
		if scale != 0 {
			v[i] = float32(r.NormFloat64()*scale + shift)
		}
	}
	en.SetTensor(t, v)
	return t
}

// The layer norm's kernels do the CPU engine's float32 operations in its
// order (sum8's lanes, the tails, dw and db in row order): the same bits,
// eager and replayed, for widths below, at and past a multiple of eight,
// and for rows that fill the dw/db kernel's tiles of 256 rows once, several
// times and with a part left over.
func TestLayerNormMatchesCPUGPU(t *testing.T) { testLayerNormMatchesCPU(t, gpuEngine(t)) }
func TestLayerNormMatchesCPUEmulated(t *testing.T) {
	testLayerNormMatchesCPU(t, cudatest.NewEmulated(cuda.Options{}))
}

func testLayerNormMatchesCPU(t *testing.T, e *cuda.Engine) {
	for _, sh := range [][2]int{{1, 1}, {3, 5}, {37, 8}, {33, 13}, {130, 128}, {5, 771}, {256, 16}, {600, 19}, {1030, 72}, {1700, 9}} {
		rows, c := sh[0], sh[1]
		for _, add := range []bool{false, true} {
			sameBitsAsCPU(t, e, fmt.Sprintf("LayerNorm %dx%d, addDX %v", rows, c, add), func(en compute.Engine) (func(), []compute.Tensor) {
				nm := en.(compute.Norms)
				x, w, b := filled(en, 1, 3, 2, rows, c), filled(en, 2, 1, 1, c), filled(en, 3, 1, 0, c)
				dy := filled(en, 4, 1, 0, rows, c)
				y, mean, rstd := filled(en, 0, 0, 0, rows, c), filled(en, 0, 0, 0, rows), filled(en, 0, 0, 0, rows)
				dx := filled(en, 0, 0, 0, rows, c)
				if add {
					dx = filled(en, 5, 1, 0, rows, c)
				}
				dw, db := filled(en, 0, 0, 0, c), filled(en, 0, 0, 0, c)
				return func() {
					nm.LayerNorm(y, mean, rstd, x, w, b, 1e-5)
					nm.LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, add)
				}, []compute.Tensor{y, mean, rstd, dx, dw, db}
			})
		}
	}
}

// The scatter-add adds each table element's rows in row order, as the CPU
// engine does, and the gathers copy or add: the same bits, eager and
// replayed, with indices repeated many times, padding, more table rows than
// the kernel's groups and widths that are not a multiple of a warp.
func TestIndexingMatchesCPUGPU(t *testing.T) { testIndexingMatchesCPU(t, gpuEngine(t)) }
func TestIndexingMatchesCPUEmulated(t *testing.T) {
	testIndexingMatchesCPU(t, cudatest.NewEmulated(cuda.Options{}))
}

func testIndexingMatchesCPU(t *testing.T, e *cuda.Engine) {
	for _, sh := range [][3]int{{1, 1, 1}, {40, 5, 3}, {1000, 70, 200}, {300, 33, 7}} {
		n, c, v := sh[0], sh[1], sh[2]
		r := rand.New(rand.NewPCG(uint64(n), uint64(c)))
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(r.IntN(v+1)) - 1 // -1 .. v-1
		}
		sameBitsAsCPU(t, e, fmt.Sprintf("Indexing %d rows of %d, table of %d", n, c, v), func(en compute.Engine) (func(), []compute.Tensor) {
			ix, err := compute.Require[compute.Indexing](en, "embedding lookup")
			if err != nil {
				t.Fatal(err)
			}
			idx := en.AllocLabels(n)
			en.SetLabels(idx, ids)
			table, grad := filled(en, 1, 1, 0, v, c), filled(en, 2, 1e-3, 0, v, c)
			dst, acc, src := filled(en, 0, 0, 0, n, c), filled(en, 3, 1, 0, n, c), filled(en, 4, 1, 0, n, c)
			return func() {
				ix.GatherRows(dst, table, idx, false)
				ix.GatherRows(acc, table, idx, true)
				ix.ScatterAddRows(grad, src, idx)
			}, []compute.Tensor{dst, acc, grad}
		})
	}
}
