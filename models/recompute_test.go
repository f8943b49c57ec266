package models_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

var recomputeModes = []models.Recompute{models.RecomputeNone, models.RecomputeGELU, models.RecomputeBlock}

// trainSteps builds m on e over host arenas (or device arenas on a device
// engine) and trains it for steps AdamW steps on random token windows of
// rows sequences; it returns the parameters after them and the first
// step's gradients.
func trainSteps(t *testing.T, e compute.Engine, m models.Model, rows, steps int) (params, grads []float32) {
	t.Helper()
	specs := m.Params()
	offsets, n := models.Layout(specs)
	p, g := models.InitArena(specs, 7), make([]float32, n)
	var pv, gv []compute.Tensor
	var pt, gt compute.Tensor // device arenas
	if _, device := e.(*cuda.Engine); device {
		pt, gt = e.Alloc(n), e.Alloc(n)
		pa := compute.Arena{Dev: pt.(*cuda.Tensor).DevicePtr(), N: n}
		ga := compute.Arena{Dev: gt.(*cuda.Tensor).DevicePtr(), N: n}
		for i, s := range specs {
			pv = append(pv, e.View(pa, offsets[i], s.Shape...))
			gv = append(gv, e.View(ga, offsets[i], s.Shape...))
		}
	} else {
		for i, s := range specs {
			pv = append(pv, e.View(compute.HostArena(p), offsets[i], s.Shape...))
			gv = append(gv, e.View(compute.HostArena(g), offsets[i], s.Shape...))
		}
	}
	require.NoError(t, m.Build(e, pv, gv, rows))
	spec := m.Data()
	bt := rows * spec.Input[0]
	in := models.Inputs{Tokens: e.AllocLabels(bt), Targets: e.AllocLabels(bt)}
	stats := e.Alloc(3)
	o, err := optim.New("adamw", optim.Config{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1})
	require.NoError(t, err)
	state := [][]float32{make([]float32, n), make([]float32, n)}
	rnd := rand.New(rand.NewPCG(3, 4))
	tok, tgt := make([]int32, bt), make([]int32, bt)
	for step := 1; step <= steps; step++ {
		for i := range tok {
			tok[i], tgt[i] = int32(rnd.IntN(spec.Classes)), int32(rnd.IntN(spec.Classes))
		}
		tgt[step] = -1
		e.SetLabels(in.Tokens, tok)
		e.SetLabels(in.Targets, tgt)
		if pt != nil {
			e.SetTensor(pt, p)
		}
		e.Zero(stats)
		m.Forward(in, 1/float32(bt), stats)
		m.Backward(nil)
		if gt != nil {
			e.ReadTensor(g, gt)
		}
		if step == 1 {
			grads = append([]float32(nil), g...)
		}
		o.Update(p, g, state, step, 1e-2)
	}
	return p, grads
}

// bitsEqual reports whether a and b hold the same float32 bits, and the
// first index where they differ.
func bitsEqual(a, b []float32) (bool, int) {
	if len(a) != len(b) {
		return false, -1
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false, i
		}
	}
	return true, 0
}

// gpt-tiny and llama-tiny trained 3 steps with each recompute mode end on
// the same parameter bits, and their first gradients are the same bits:
// recomputing runs the same operations on the same values.
func TestRecomputeKeepsBits(t *testing.T) {
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	for _, name := range []string{"gpt-tiny", "llama-tiny"} {
		var wantP, wantG []float32
		for _, r := range recomputeModes {
			m, err := models.New(name, models.Config{Recompute: r})
			require.NoError(t, err)
			p, g := trainSteps(t, e, m, 2, 3)
			if r == models.RecomputeNone {
				wantP, wantG = p, g
				continue
			}
			ok, i := bitsEqual(wantG, g)
			assert.True(t, ok, "%s --recompute %s: first gradients differ at %d", name, r, i)
			ok, i = bitsEqual(wantP, p)
			assert.True(t, ok, "%s --recompute %s: parameters differ at %d", name, r, i)
		}
	}
}

// On the CUDA engine's fp32 per-layer path (emulated) the modes keep the
// bits too, and those of the CPU engine's loops that the emulation runs.
func TestRecomputeKeepsBitsCUDAFP32(t *testing.T) {
	cfg := models.GPTConfig{Layers: 3, Heads: 2, Width: 16, Context: 8, Vocab: 32}
	var want []float32
	for _, r := range recomputeModes {
		m, err := models.NewGPT("gpt", cfg)
		require.NoError(t, err)
		require.NoError(t, m.SetPrecision(compute.PrecisionF32))
		require.NoError(t, m.SetRecompute(r))
		p, _ := trainSteps(t, cudatest.NewEmulated(cuda.Options{}), m, 2, 2)
		if want == nil {
			want = p
			continue
		}
		ok, i := bitsEqual(want, p)
		assert.True(t, ok, "--recompute %s: parameters differ at %d", r, i)
	}
}

// In bf16 on the CUDA engine (emulated) --recompute block keeps the bits
// of none: the first gradients and the parameters after 3 AdamW steps of a
// 3-layer GPT at shapes the bf16 kernels take; the model runs in bf16 in
// both modes.
func TestRecomputeBlockKeepsBitsCUDABF16(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  models.Config
	}{
		{"gpt", models.Config{Layers: 3, Heads: 2, Width: 64, Context: 64, Vocab: 256}},
		{"llama", models.Config{Layers: 3, Heads: 4, KVHeads: 2, Width: 128, Context: 64, Vocab: 256}},
	} {
		var wantP, wantG []float32
		for _, r := range []models.Recompute{models.RecomputeNone, models.RecomputeBlock} {
			cfg := tc.cfg
			cfg.Recompute = r
			m, err := models.New(tc.name, cfg)
			require.NoError(t, err)
			p, g := trainSteps(t, cudatest.NewEmulated(cuda.Options{}), m, 2, 3)
			require.Equal(t, compute.PrecisionBF16, m.(interface{ Precision() compute.Precision }).Precision(), "%s --recompute %s", tc.name, r)
			if wantP == nil {
				wantP, wantG = p, g
				continue
			}
			ok, i := bitsEqual(wantG, g)
			assert.True(t, ok, "%s --recompute %s: first gradients differ at %d", tc.name, r, i)
			ok, i = bitsEqual(wantP, p)
			assert.True(t, ok, "%s --recompute %s: parameters differ at %d", tc.name, r, i)
		}
	}
}

// allocated is the bytes of heap that build allocates.
func allocated(build func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	build()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc)
}

// ActivationBytes is what a build on the CPU engine allocates, in every
// mode, to within what it leaves out (attention's scratch rows, rotary
// tables, tensor headers: a few hundred KiB here, under 1%); and each mode
// saves memory over the one before.
func TestRecomputeActivationBytes(t *testing.T) {
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	const seqs = 8
	for _, name := range []string{"gpt-tiny", "llama-tiny"} {
		est := map[models.Recompute]int64{}
		for _, r := range recomputeModes {
			m, err := models.New(name, models.Config{Recompute: r})
			require.NoError(t, err)
			specs := m.Params()
			_, n := models.Layout(specs)
			arena := make([]float32, n) // parameters and gradients: one arena serves both here
			pv := make([]compute.Tensor, len(specs))
			offsets, _ := models.Layout(specs)
			for i, s := range specs {
				pv[i] = e.View(compute.HostArena(arena), offsets[i], s.Shape...)
			}
			got := allocated(func() { require.NoError(t, m.Build(e, pv, pv, seqs)) })
			want := m.(models.ActivationSizer).ActivationBytes(seqs)
			est[r] = want
			t.Logf("%s --recompute %s: estimate %.2f MiB, allocated %.2f MiB", name, r, float64(want)/(1<<20), float64(got)/(1<<20))
			assert.GreaterOrEqual(t, got, want, "%s --recompute %s", name, r)
			assert.Less(t, got-want, int64(1<<20), "%s --recompute %s", name, r)
		}
		assert.Less(t, est[models.RecomputeGELU], est[models.RecomputeNone], name)
		assert.Less(t, est[models.RecomputeBlock], est[models.RecomputeGELU], name)
	}
}

// In bf16 ActivationBytes is what a build takes of the CUDA engine's
// (emulated) pool in none and block, besides what does not depend on the
// mode or the layers: the same bytes in both modes, and at 2 and 3 layers
// less the third layer's weight copy; that is the GEMM workspace (32 MiB),
// the bf16 copy of the weights (2 bytes a parameter) and the kernels'
// scratch (under 64 KiB at these sizes). Block keeps less.
func TestRecomputeActivationBytesBF16(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  models.Config
	}{
		{"gpt", models.Config{Heads: 2, Width: 64, Context: 64, Vocab: 256}},
		{"llama", models.Config{Heads: 4, KVHeads: 2, Width: 128, Context: 64, Vocab: 256}},
	} {
		t.Run(tc.name, func(t *testing.T) { activationBytesBF16(t, tc.name, tc.cfg) })
	}
}

// activationBytesBF16 is TestRecomputeActivationBytesBF16 of one model.
func activationBytesBF16(t *testing.T, name string, cfg models.Config) {
	const seqs = 4
	taken := func(layers int, r models.Recompute) (got, est, params int64) {
		cfg := cfg
		cfg.Layers, cfg.Recompute = layers, r
		m, err := models.New(name, cfg)
		require.NoError(t, err)
		e := cudatest.NewEmulated(cuda.Options{})
		pv := deviceViews(e, m)
		before := e.TakenBytes()
		require.NoError(t, m.Build(e, pv, pv, seqs))
		require.Equal(t, compute.PrecisionBF16, m.(interface{ Precision() compute.Precision }).Precision())
		for _, p := range m.Params() {
			params += int64(p.Size())
		}
		return e.TakenBytes() - before, m.(models.ActivationSizer).ActivationBytes(seqs), params
	}
	const workspace = 32 << 20
	var over int64 = -1
	est := map[models.Recompute]int64{}
	for _, r := range []models.Recompute{models.RecomputeNone, models.RecomputeBlock} {
		got2, est2, n2 := taken(2, r)
		got3, est3, n3 := taken(3, r)
		t.Logf("--recompute %s: estimate %d bytes at 3 layers, taken %d (%d at 2 layers, estimate %d)", r, est3, got3, got2, est2)
		assert.InDelta(t, est3-est2, got3-got2-2*(n3-n2), 512, "--recompute %s: a layer's bytes", r)
		if over < 0 {
			over = got3 - est3
		}
		assert.Equal(t, over, got3-est3, "--recompute %s: what the estimate leaves out does not depend on the mode", r)
		scratch := got3 - est3 - workspace - 2*n3
		assert.True(t, scratch >= 0 && scratch < 64<<10, "--recompute %s: %d bytes besides the estimate, the workspace and the weights' copy", r, scratch)
		est[r] = est3
	}
	assert.Less(t, est[models.RecomputeBlock], est[models.RecomputeNone])
}

// A mode that is not one, or a model without transformer blocks, is
// refused naming the model; a GPT that an engine would run in bf16
// refuses recompute gelu at Build and says to use block or fp32 (block
// builds in bf16); a mode cannot change after Build.
func TestRecomputeErrors(t *testing.T) {
	_, err := models.New("gpt-tiny", models.Config{Recompute: "full"})
	assert.EqualError(t, err, `model gpt-tiny: recompute "full": want none, gelu or block`)
	_, err = models.New("mlp", models.Config{Recompute: models.RecomputeBlock})
	assert.ErrorContains(t, err, "model mlp: recompute block: the mlp has no transformer blocks")
	m, err := models.New("mlp", models.Config{Recompute: models.RecomputeNone})
	require.NoError(t, err)
	assert.NotNil(t, m)

	for _, p := range []compute.Precision{compute.PrecisionAuto, compute.PrecisionBF16} {
		for _, r := range []models.Recompute{models.RecomputeGELU, models.RecomputeBlock} {
			g, err := models.NewGPT("gpt", models.GPTConfig{Layers: 1, Heads: 2, Width: 64, Context: 64, Vocab: 256})
			require.NoError(t, err)
			require.NoError(t, g.SetPrecision(p))
			require.NoError(t, g.SetRecompute(r))
			ce := cudatest.NewEmulated(cuda.Options{})
			pv := deviceViews(ce, g)
			err = g.Build(ce, pv, pv, 1)
			if r == models.RecomputeBlock {
				require.NoError(t, err, "precision %q", p)
				assert.Equal(t, compute.PrecisionBF16, g.Precision())
				continue
			}
			require.Error(t, err, "precision %q", p)
			name := string(p)
			if p == compute.PrecisionAuto {
				name = "auto"
			}
			assert.EqualError(t, err, "build model gpt: recompute gelu has no bf16 form (a bf16 MLP computes its GELU in its first GEMM): at precision "+
				name+" engine cuda/cublas runs the model in bf16; use recompute block, or precision fp32")
		}
	}
	// at fp32 the CUDA engine recomputes gelu
	g, err := models.NewGPT("gpt", models.GPTConfig{Layers: 1, Heads: 2, Width: 64, Context: 64, Vocab: 256})
	require.NoError(t, err)
	require.NoError(t, g.SetPrecision(compute.PrecisionF32))
	require.NoError(t, g.SetRecompute(models.RecomputeGELU))
	ce := cudatest.NewEmulated(cuda.Options{})
	pv := deviceViews(ce, g)
	require.NoError(t, g.Build(ce, pv, pv, 1))

	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	l, err := models.NewLlama("llama", smallLlama)
	require.NoError(t, err)
	newLMRun(t, e, l, 1, 1, 1)
	assert.EqualError(t, l.SetRecompute(models.RecomputeGELU), "recompute gelu: the model is built already")
}

// A network of the public layers checkpoints its own blocks: residual
// blocks in checkpoints of one pool give the gradients of the same blocks
// without them, bit for bit; a checkpoint inside another of the same pool
// is refused at Build.
func TestCheckpointOfUserLayers(t *testing.T) {
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	block := func(i int) *models.Residual {
		return models.NewResidual("block",
			models.NewLinear("fc"+string(rune('a'+i)), 6, 12, compute.ReLU),
			models.NewLinear("proj"+string(rune('a'+i)), 12, 6, compute.Identity))
	}
	build := func(checkpoint bool) (*models.Sequential, []float32, []compute.Tensor) {
		pool := models.NewScratchPool()
		var layers []models.Layer
		for i := 0; i < 3; i++ {
			if checkpoint {
				layers = append(layers, models.NewCheckpoint("ckpt", pool, block(i)))
			} else {
				layers = append(layers, block(i))
			}
		}
		layers = append(layers, models.NewLinear("out", 6, 4, compute.Identity))
		s := models.NewSequential("net", []int{6}, 4, layers...)
		specs := s.Params()
		offsets, n := models.Layout(specs)
		p, g := models.InitArena(specs, 2), make([]float32, n)
		var pv, gv []compute.Tensor
		for i, sp := range specs {
			pv = append(pv, e.View(compute.HostArena(p), offsets[i], sp.Shape...))
			gv = append(gv, e.View(compute.HostArena(g), offsets[i], sp.Shape...))
		}
		require.NoError(t, s.Build(e, pv, gv, 5))
		return s, g, pv
	}
	grads := func(checkpoint bool) []float32 {
		s, g, _ := build(checkpoint)
		x := e.Alloc(5, 6)
		xs := make([]float32, 30)
		for i := range xs {
			xs[i] = float32(i%7) - 3
		}
		e.SetTensor(x, xs)
		y := s.Forward(x)
		dy := e.Alloc(5, 4)
		e.Copy(dy, y)
		s.Backward(dy, nil)
		return g
	}
	plain, ckpt := grads(false), grads(true)
	ok, i := bitsEqual(plain, ckpt)
	assert.True(t, ok, "gradients differ at %d", i)

	pool := models.NewScratchPool()
	nested := models.NewSequential("net", []int{6}, 6,
		models.NewCheckpoint("outer", pool, models.NewCheckpoint("inner", pool, block(0))))
	specs := nested.Params()
	arena := models.InitArena(specs, 1)
	offsets, _ := models.Layout(specs)
	var pv []compute.Tensor
	for i, sp := range specs {
		pv = append(pv, e.View(compute.HostArena(arena), offsets[i], sp.Shape...))
	}
	assert.ErrorContains(t, nested.Build(e, pv, pv, 2), "inner: a checkpoint inside a checkpoint of the same scratch pool")
}

// In bf16 a checkpoint holds residual blocks: a layer whose blocks end in
// a bare layer norm is refused at precision bf16 with one line naming the
// layer, and runs in fp32 at auto, saying why.
func TestRecomputeBlockBF16NeedsResidualBlocks(t *testing.T) {
	spec := models.GPTConfig{Layers: 1, Heads: 2, Width: 64, Context: 64, Vocab: 256}.DecoderSpec()
	block := spec.Block
	spec.Block = func(i int, hidden *models.ScratchPool) []models.Layer {
		return append(block(i, hidden), models.NewLayerNorm(fmt.Sprintf("h.%d.ln_3", i), 64))
	}
	for _, p := range []compute.Precision{compute.PrecisionBF16, compute.PrecisionAuto} {
		d, err := models.NewDecoder("gpt", spec)
		require.NoError(t, err)
		require.NoError(t, d.SetRecompute(models.RecomputeBlock))
		require.NoError(t, d.SetPrecision(p))
		e := cudatest.NewEmulated(cuda.Options{})
		pv := deviceViews(e, d)
		err = d.Build(e, pv, pv, 1)
		const why = "h.0: layer 2 is a *models.LayerNorm: in bf16 a checkpoint holds residual blocks (their stream's gradient is updated in place)"
		if p == compute.PrecisionBF16 {
			assert.EqualError(t, err, "build model gpt: precision bf16: "+why)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, compute.PrecisionF32, d.Precision())
		assert.EqualError(t, d.FP32Reason(), why)
	}
}
