package main

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/models"
)

// TestOwnLMInBF16Emulated: a model of the public layers that is not a GPT
// builds in bf16 on the CUDA engine (emulated) through the layers' bf16
// plans, and its gradient after one step is the fp32 CPU engine's to bf16
// precision, tensor by tensor.
func TestOwnLMInBF16Emulated(t *testing.T) {
	testOwnLMInBF16(t, cudatest.NewEmulated(cuda.Options{}))
}

// TestOwnLMInBF16GPU is TestOwnLMInBF16Emulated on the GPU.
func TestOwnLMInBF16GPU(t *testing.T) {
	e, err := cuda.New(cuda.Options{Device: -1})
	if err != nil {
		t.Skip("no GPU library: " + err.Error())
	}
	defer e.Close()
	testOwnLMInBF16(t, e)
}

func testOwnLMInBF16(t *testing.T, e *cuda.Engine) {
	cfg := models.Config{Layers: 2, Heads: 2, Width: 64, Context: 64, Vocab: 256, Precision: compute.PrecisionBF16}
	got, m := ownLMGradients(t, e, cfg)
	if p := m.Precision(); p != compute.PrecisionBF16 {
		t.Fatalf("precision %s after the build, want bf16", p)
	}
	line, warn := m.BuildReport()
	t.Log(line)
	if warn {
		t.Errorf("build report warns: %s", line)
	}
	ce, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Precision = compute.PrecisionAuto
	want, cm := ownLMGradients(t, ce, cfg)
	if p := cm.Precision(); p != compute.PrecisionF32 {
		t.Fatalf("precision %s on the CPU, want fp32", p)
	}
	offsets, _ := models.Layout(m.Params())
	for i, s := range m.Params() {
		var d, r float64
		for j := offsets[i]; j < offsets[i]+s.Size(); j++ {
			d += (float64(got[j]) - float64(want[j])) * (float64(got[j]) - float64(want[j]))
			r += float64(want[j]) * float64(want[j])
		}
		if rel := math.Sqrt(d / r); !(rel < 0.05) {
			t.Errorf("%s: the bf16 gradient is %.3g of the fp32 one's L2 norm away", s.Name, rel)
		}
	}
}

// ownLMGradients builds ownlm of cfg on e over arenas of e's memory (its
// parameters ownlm's initialisation times 3, so that every gradient stands
// above bf16's rounding), runs one forward and backward of 2 sequences,
// and returns the gradient arena and the model.
func ownLMGradients(t *testing.T, e compute.Engine, cfg models.Config) ([]float32, *models.Decoder) {
	t.Helper()
	mm, err := newOwnLM(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := mm.(*models.Decoder)
	specs := m.Params()
	offsets, n := models.Layout(specs)
	p := models.InitArena(specs, 3)
	for i := range p {
		p[i] *= 3
	}
	pt, gt := e.Alloc(n), e.Alloc(n)
	e.SetTensor(pt, p)
	arena := func(x compute.Tensor) compute.Arena {
		if d, ok := x.(*cuda.Tensor); ok {
			return compute.Arena{Dev: d.DevicePtr(), N: n}
		}
		return compute.HostArena(compute.HostData(x))
	}
	pa, ga := arena(pt), arena(gt)
	pv, gv := make([]compute.Tensor, len(specs)), make([]compute.Tensor, len(specs))
	for i, s := range specs {
		pv[i], gv[i] = e.View(pa, offsets[i], s.Shape...), e.View(ga, offsets[i], s.Shape...)
	}
	const rows = 2
	if err := m.Build(e, pv, gv, rows); err != nil {
		t.Fatal(err)
	}
	bt := rows * cfg.Context
	tok, tgt := make([]int32, bt), make([]int32, bt)
	for i := range tok {
		tok[i], tgt[i] = int32((i*37+5)%cfg.Vocab), int32((i*11+3)%cfg.Vocab)
	}
	in := models.Inputs{Tokens: e.AllocLabels(bt), Targets: e.AllocLabels(bt)}
	e.SetLabels(in.Tokens, tok)
	e.SetLabels(in.Targets, tgt)
	m.Forward(in, 1, e.Alloc(3))
	m.Backward(nil)
	g := make([]float32, n)
	e.ReadTensor(g, gt)
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	return g, m
}
