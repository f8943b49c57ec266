package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/optim"
)

// The sharded update (ZeRO-1) on the device: PEs, each with an engine of its
// own, sum the squares of their shards (SumSquaresInto), the test gathers
// the sums into every PE's partials as the trainer's all-gather would, and
// each PE updates its shard (UpdateShard). The host reference is ddp's host
// sharded update: optim.SumSquares per shard, added from 0 in PE order,
// optim.ClipFactor of the square root, the optimizer per shard.

const (
	shardPEs    = 3
	shardStride = 16 // words between two PEs' sums in the partials
)

// shardPE is one PE of a sharded update.
type shardPE struct {
	e      *cuda.Engine
	lo, hi int
	p, g   compute.Tensor // the shard of the parameter and gradient arenas
	parts  compute.Tensor // shardPEs float64 sums, shardStride words apart
}

// newShardPEs makes the PEs of an arena of n elements laid at element base
// of its device memory, each holding params[lo:hi] of its shard.
func newShardPEs(t *testing.T, newEngine func(t *testing.T) *cuda.Engine, n, base int, params []float32, spans [][2]int) []*shardPE {
	t.Helper()
	pes := make([]*shardPE, shardPEs)
	for q := range pes {
		e := newEngine(t)
		lo, hi := comm.Shard(0, n, shardPEs, q)
		if hi <= lo {
			t.Fatalf("PE %d: empty shard [%d, %d) of %d", q, lo, hi, n)
		}
		pa := e.Alloc(base + n).(*cuda.Tensor)
		ga := e.Alloc(base + n).(*cuda.Tensor)
		pe := &shardPE{e: e, lo: lo, hi: hi,
			p:     e.View(compute.Arena{Dev: pa.DevicePtr(), N: pa.Size()}, base+lo, hi-lo),
			g:     e.View(compute.Arena{Dev: ga.DevicePtr(), N: ga.Size()}, base+lo, hi-lo),
			parts: e.Alloc(shardPEs * shardStride)}
		e.SetTensor(pe.p, params[lo:hi])
		if spans != nil {
			if err := e.SetDecayExempt(n, spans); err != nil {
				t.Fatal(err)
			}
		}
		pes[q] = pe
	}
	return pes
}

// slot is PE q's float64 in pe's partials.
func (pe *shardPE) slot(q int) compute.Tensor {
	pt := pe.parts.(*cuda.Tensor)
	return pe.e.View(compute.Arena{Dev: pt.DevicePtr(), N: pt.Size()}, q*shardStride, 2)
}

// gatherSums is the trainer's all-gather of the PEs' sums: each PE's own
// slot is copied into every other PE's partials, bit for bit. It returns
// the sums.
func gatherSums(pes []*shardPE) []float64 {
	sums := make([]float64, len(pes))
	w := make([]float32, 2)
	for q, pe := range pes {
		pe.e.ReadTensor(w, pe.slot(q))
		sums[q] = math.Float64frombits(uint64(math.Float32bits(w[0])) | uint64(math.Float32bits(w[1]))<<32)
		for r, other := range pes {
			if r != q {
				other.e.SetTensor(other.slot(q), w)
			}
		}
	}
	return sums
}

// checkSums compares the PEs' sums with optim.SumSquares of their shards:
// the same bits when exact (the emulator adds as optim does), else to a
// relative 1e-12 (the GPU adds the same squares in another fixed order).
func checkSums(t *testing.T, what string, pes []*shardPE, g []float32, sums []float64, exact bool) {
	t.Helper()
	for q, pe := range pes {
		want := optim.SumSquares(g[pe.lo:pe.hi])
		if exact && math.Float64bits(sums[q]) != math.Float64bits(want) ||
			!exact && !(math.Abs(sums[q]-want) <= 1e-12*want) {
			t.Fatalf("%s: PE %d: sum of squares of [%d, %d) = %v (%#016x), want %v (%#016x)",
				what, q, pe.lo, pe.hi, sums[q], math.Float64bits(sums[q]), want, math.Float64bits(want))
		}
	}
}

// sumInOrder is ddp's fold of the PEs' sums: from 0, in PE order.
func sumInOrder(sums []float64) float64 {
	s := 0.0
	for _, v := range sums {
		s += v
	}
	return s
}

// checkStatus compares every PE's update status with the verdict of sum.
func checkStatus(t *testing.T, what string, pes []*shardPE, skipped bool, sum float64, clip float32) {
	t.Helper()
	wantScale := float32(1)
	if clip > 0 {
		wantScale, _ = optim.ClipFactor(math.Sqrt(sum), clip)
	}
	wantNorm := float32(math.Sqrt(sum))
	for q, pe := range pes {
		sk, scale, norm, err := pe.e.UpdateStatus()
		if err != nil {
			t.Fatal(err)
		}
		if sk != skipped || math.Float32bits(scale) != math.Float32bits(wantScale) || math.Float32bits(norm) != math.Float32bits(wantNorm) {
			t.Fatalf("%s: PE %d: status skipped %v, scale %v, norm %v; want %v, %v, %v (sum %v)",
				what, q, sk, scale, norm, skipped, wantScale, wantNorm, sum)
		}
	}
}

// shardCase is one run of runShardedUpdates.
type shardCase struct {
	n, base int
	clip    float32
	spans   [][2]int
	// captured: steps after the first are replayed from graphs, one of
	// SumSquaresInto and one of UpdateShard per PE, recorded at step 2.
	captured bool
}

// runShardedUpdates runs steps sharded updates with o and compares every
// PE's shard of the parameters, its optimizer state and its status, bit
// for bit, with the host's sharded update after every step.
func runShardedUpdates(t *testing.T, newEngine func(t *testing.T) *cuda.Engine, o optim.Optimizer, c shardCase, steps int, exactSums bool) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(c.n), uint64(c.base)))
	hp, hg := updateValues(r, c.n)
	pes := newShardPEs(t, newEngine, c.n, c.base, hp, c.spans)
	hostUpdate := hostUpdater(t, o, c.spans)
	state := make([][][]float32, len(pes)) // PE, slot
	for q, pe := range pes {
		for range o.Slots() {
			state[q] = append(state[q], make([]float32, pe.hi-pe.lo))
		}
	}
	sumGraphs := make([]*cuda.Graph, len(pes))
	updGraphs := make([]*cuda.Graph, len(pes))
	t.Cleanup(func() {
		for _, gs := range [][]*cuda.Graph{sumGraphs, updGraphs} {
			for _, g := range gs {
				if g != nil {
					_ = g.Close()
				}
			}
		}
	})
	capture := func(pe *shardPE, record func() error) *cuda.Graph {
		t.Helper()
		if err := pe.e.BeginCapture(); err != nil {
			t.Fatal(err)
		}
		rerr := record()
		g, err := pe.e.EndCapture()
		if rerr != nil || err != nil {
			t.Fatalf("capture: %v, %v", rerr, err)
		}
		return g
	}
	got := make([]float32, c.n)
	for step := 1; step <= steps; step++ {
		lr := float32(0.05) / float32(step)
		if step > 1 {
			for i := range hg {
				hg[i] = float32(r.NormFloat64() * 0.1)
			}
		}
		replay := c.captured && step > 1
		for q, pe := range pes {
			pe.e.SetTensor(pe.g, hg[pe.lo:pe.hi])
			switch {
			case !replay:
				pe.e.SumSquaresInto(pe.slot(q), pe.g)
			case sumGraphs[q] == nil:
				sumGraphs[q] = capture(pe, func() error { pe.e.SumSquaresInto(pe.slot(q), pe.g); return nil })
				fallthrough
			default:
				if err := sumGraphs[q].Launch(cuda.StepValues{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		sums := gatherSums(pes)
		checkSums(t, fmt.Sprintf("step %d", step), pes, hg, sums, exactSums)
		sum := sumInOrder(sums)
		for q, pe := range pes {
			upd := func() error {
				return pe.e.UpdateShard(o, pe.p, pe.g, pe.lo, pe.parts, shardPEs, shardStride, step, lr, c.clip)
			}
			switch {
			case !replay:
				if err := upd(); err != nil {
					t.Fatalf("step %d: PE %d: UpdateShard: %v", step, q, err)
				}
			case updGraphs[q] == nil:
				updGraphs[q] = capture(pe, upd)
				fallthrough
			default:
				if err := updGraphs[q].Launch(cuda.StepValues{Step: step, LR: lr}); err != nil {
					t.Fatal(err)
				}
			}
		}
		what := fmt.Sprintf("step %d", step)
		checkStatus(t, what, pes, false, sum, c.clip)
		scale := float32(1)
		if c.clip > 0 {
			scale, _ = optim.ClipFactor(math.Sqrt(sum), c.clip)
		}
		for q, pe := range pes {
			g := append([]float32(nil), hg[pe.lo:pe.hi]...)
			optim.Scale(g, scale) // x*1 is x
			hostUpdate(hp[pe.lo:pe.hi:pe.hi], g, state[q], pe.lo, step, lr)
			w := got[:pe.hi-pe.lo]
			pe.e.ReadTensor(w, pe.p)
			compareBits(t, fmt.Sprintf("%s: PE %d: params", what, q), w, hp[pe.lo:pe.hi])
			st := pe.e.OptimizerState()
			if len(st) != o.Slots() {
				t.Fatalf("%s: PE %d: %d state tensors, want %d", what, q, len(st), o.Slots())
			}
			for i, s := range st {
				if s.Size() != pe.hi-pe.lo {
					t.Fatalf("%s: PE %d: state %s of %d elements for a shard of %d", what, q, o.StateNames()[i], s.Size(), pe.hi-pe.lo)
				}
				pe.e.ReadTensor(w, s)
				compareBits(t, fmt.Sprintf("%s: PE %d: state %s", what, q, o.StateNames()[i]), w, state[q][i])
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// shardOptimizers are SGD with momentum and AdamW, both with weight decay
// (so that the exemptions matter).
func shardOptimizers(t *testing.T) map[string]optim.Optimizer {
	t.Helper()
	sgd, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9, WeightDecay: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	wc := optim.DefaultAdamWConfig()
	wc.WeightDecay = 0.01
	adamw, err := optim.NewAdamW(wc)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]optim.Optimizer{"momentum+wd": sgd, "adamw+wd": adamw}
}

func testShardedUpdates(t *testing.T, newEngine func(t *testing.T) *cuda.Engine, exactSums bool) {
	// 4099 elements: shards [0, 1376), [1376, 2736), [2736, 4099); the
	// spans cross both inner boundaries. Clipping at 0.5 clips (a norm of
	// about 6.4), and by another factor than any shard's own norm would.
	spans := [][2]int{{5, 900}, {1370, 1380}, {2000, 2003}, {2730, 2740}, {4000, 4099}}
	for name, o := range shardOptimizers(t) {
		for _, c := range []shardCase{
			{n: 4099}, {n: 4099, clip: 0.5}, {n: 4099, spans: spans}, {n: 4099, clip: 0.5, spans: spans},
			{n: 4099, base: 1, clip: 0.5, spans: spans}, // unaligned: the scalar path of the kernels
			{n: 4099, clip: 0.5, spans: spans, captured: true},
		} {
			steps := 2
			if c.captured {
				steps = 3 // one graph, launched at steps 2 and 3
			}
			t.Run(fmt.Sprintf("%s/base=%d/clip=%g/exempt=%d/captured=%v", name, c.base, c.clip, len(c.spans), c.captured), func(t *testing.T) {
				runShardedUpdates(t, newEngine, o, c, steps, exactSums)
			})
		}
	}
}

func TestShardedUpdateEmulated(t *testing.T) {
	testShardedUpdates(t, func(*testing.T) *cuda.Engine { return cudatest.NewEmulated(cuda.Options{}) }, true)
}

func TestShardedUpdateGPU(t *testing.T) {
	gpuEngine(t) // skips without a GPU
	testShardedUpdates(t, func(t *testing.T) *cuda.Engine { return gpuEngine(t) }, false)
}

// A non-finite gradient in one shard skips the step on every PE, though
// the other PEs' own gradients are finite; with a halt, the next step skips
// too, until the status is reset.
func testShardedSkips(t *testing.T, newEngine func(t *testing.T) *cuda.Engine) {
	o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1001 // shards [0, 336), [336, 672), [672, 1001)
	hp := make([]float32, n)
	hg := make([]float32, n)
	for i := range hp {
		hp[i], hg[i] = float32(i), 0.5
	}
	pes := newShardPEs(t, newEngine, n, 0, hp, nil)
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			g := append([]float32(nil), hg...)
			g[pes[1].lo+7] = bad
			step := func(s int) []float64 {
				t.Helper()
				for q, pe := range pes {
					pe.e.SetTensor(pe.g, g[pe.lo:pe.hi])
					pe.e.SumSquaresInto(pe.slot(q), pe.g)
				}
				sums := gatherSums(pes)
				for q, pe := range pes {
					if err := pe.e.UpdateShard(o, pe.p, pe.g, pe.lo, pe.parts, shardPEs, shardStride, s, 0.1, 1); err != nil {
						t.Fatalf("PE %d: %v", q, err)
					}
				}
				return sums
			}
			for _, pe := range pes {
				pe.e.SetHaltOnNonFinite(true)
			}
			sums := step(1)
			if s := sums[1]; !math.IsNaN(s) && !math.IsInf(s, 1) {
				t.Fatalf("the bad shard's sum of squares is %v", s)
			}
			checkStatus(t, "non-finite step", pes, true, sumInOrder(sums), 1)
			g[pes[1].lo+7] = 0.5
			// Halted: skipped, though the verdict's scale and norm are
			// those of the finite sum.
			checkStatus(t, "step after a halt", pes, true, sumInOrder(step(1)), 1)
			got := make([]float32, n)
			for q, pe := range pes {
				w := got[:pe.hi-pe.lo]
				pe.e.ReadTensor(w, pe.p)
				compareBits(t, fmt.Sprintf("PE %d: params after skipped steps", q), w, hp[pe.lo:pe.hi])
				if err := pe.e.ResetUpdateStatus(); err != nil {
					t.Fatal(err)
				}
				pe.e.SetHaltOnNonFinite(false)
			}
			sums = step(1)
			sum := sumInOrder(sums)
			checkStatus(t, "step after the reset", pes, false, sum, 1)
			scale, _ := optim.ClipFactor(math.Sqrt(sum), 1)
			for q, pe := range pes {
				want := append([]float32(nil), hp[pe.lo:pe.hi]...)
				gs := append([]float32(nil), g[pe.lo:pe.hi]...)
				optim.Scale(gs, scale)
				o.Update(want, gs, [][]float32{make([]float32, len(want))}, 1, 0.1)
				w := got[:pe.hi-pe.lo]
				pe.e.ReadTensor(w, pe.p)
				compareBits(t, fmt.Sprintf("PE %d: params after the reset", q), w, want)
				pe.e.SetTensor(pe.p, hp[pe.lo:pe.hi]) // for the next subtest
				if err := pe.e.ResetUpdateStatus(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestShardedUpdateSkipsEmulated(t *testing.T) {
	testShardedSkips(t, func(*testing.T) *cuda.Engine { return cudatest.NewEmulated(cuda.Options{}) })
}

func TestShardedUpdateSkipsGPU(t *testing.T) {
	gpuEngine(t)
	testShardedSkips(t, func(t *testing.T) *cuda.Engine { return gpuEngine(t) })
}

// One shard that is the whole arena, with its own sum as the only partial,
// is Update: the same parameters, state and status words, bit for bit.
// On the GPU this holds only because SumSquaresInto adds the squares in
// the order of Update's own gradient check, which is also SumSquares' order
// there (withSumSquares; the emulator's SumSquares is the CPU engine's loop,
// which adds in another order than optim.SumSquares).
func testShardOfOne(t *testing.T, newEngine func(t *testing.T) *cuda.Engine, withSumSquares bool) {
	for name, o := range shardOptimizers(t) {
		t.Run(name, func(t *testing.T) {
			const n = 4099
			r := rand.New(rand.NewPCG(7, 11))
			hp, _ := updateValues(r, n)
			whole, shard := newEngine(t), newEngine(t)
			type arena struct{ p, g, parts compute.Tensor }
			var a [2]arena
			for i, e := range []*cuda.Engine{whole, shard} {
				a[i] = arena{e.Alloc(n), e.Alloc(n), e.Alloc(2)}
				e.SetTensor(a[i].p, hp)
			}
			hg := make([]float32, n)
			for step := 1; step <= 2; step++ {
				for i := range hg {
					hg[i] = float32(r.NormFloat64())
				}
				whole.SetTensor(a[0].g, hg)
				shard.SetTensor(a[1].g, hg)
				if err := whole.Update(o, a[0].p, a[0].g, step, 0.01, 3); err != nil {
					t.Fatal(err)
				}
				shard.SumSquaresInto(a[1].parts, a[1].g)
				if err := shard.UpdateShard(o, a[1].p, a[1].g, 0, a[1].parts, 1, 0, step, 0.01, 3); err != nil {
					t.Fatal(err)
				}
				var w [2][]float32
				for i, e := range []*cuda.Engine{whole, shard} {
					w[i] = make([]float32, n)
					e.ReadTensor(w[i], a[i].p)
				}
				compareBits(t, fmt.Sprintf("step %d: params", step), w[1], w[0])
				for k := range o.Slots() {
					whole.ReadTensor(w[0], whole.OptimizerState()[k])
					shard.ReadTensor(w[1], shard.OptimizerState()[k])
					compareBits(t, fmt.Sprintf("step %d: state %d", step, k), w[1], w[0])
				}
				var sw [2][]float32
				for i, e := range []*cuda.Engine{whole, shard} {
					sw[i] = make([]float32, 4)
					e.ReadTensor(sw[i], e.StatusTensor())
				}
				compareBits(t, fmt.Sprintf("step %d: status", step), sw[1], sw[0])
				if sw[0][1] == 1 {
					t.Fatalf("step %d: no clipping (status %v): the test wants a norm above 3", step, sw[0])
				}
				if !withSumSquares {
					continue
				}
				// SumSquares (waits) is the same sum.
				sum := make([]float32, 2)
				shard.ReadTensor(sum, a[1].parts)
				bits := uint64(math.Float32bits(sum[0])) | uint64(math.Float32bits(sum[1]))<<32
				if got := shard.SumSquares(a[1].g); math.Float64bits(got) != bits {
					t.Errorf("step %d: SumSquaresInto %v, SumSquares %v", step, math.Float64frombits(bits), got)
				}
			}
		})
	}
}

func TestShardOfOneEmulated(t *testing.T) {
	testShardOfOne(t, func(*testing.T) *cuda.Engine { return cudatest.NewEmulated(cuda.Options{}) }, false)
}

func TestShardOfOneGPU(t *testing.T) {
	gpuEngine(t)
	testShardOfOne(t, func(t *testing.T) *cuda.Engine { return gpuEngine(t) }, true)
}

func TestUpdateShardRejects(t *testing.T) {
	e := cudatest.NewEmulated(cuda.Options{})
	sgd, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	p, g, parts := e.Alloc(8), e.Alloc(8), e.Alloc(3*shardStride)
	if err := e.SetDecayExempt(20, [][2]int{{2, 5}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what          string
		off           int
		nparts, strid int
		want          string
	}{
		{"a shard before the arena", -1, 3, shardStride, "shard at element -1"},
		{"no partial sums", 0, 0, shardStride, "partial sums"},
		{"an odd stride", 0, 3, 3, "partial sums"},
		{"a stride below a float64", 0, 3, 0, "partial sums"},
		{"more sums than the tensor holds", 0, 4, shardStride, "partial sums"},
		{"a shard past the exemptions", 13, 3, shardStride, "exemptions"},
	} {
		err := e.UpdateShard(sgd, p, g, c.off, parts, c.nparts, c.strid, 1, 0.1, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("UpdateShard with %s: %v, want an error about %q", c.what, err, c.want)
		}
	}
	if err := e.UpdateShard(sgd, p, g, 12, parts, 3, shardStride, 1, 0.1, 0); err != nil {
		t.Errorf("UpdateShard of [12, 20) with exemptions for 20: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("SumSquaresInto a dst of 3 words did not panic")
			}
		}()
		e.SumSquaresInto(e.Alloc(3), g)
	}()
}
