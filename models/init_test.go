package models

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	specs := []ParamSpec{{Name: "a", Shape: []int{2, 3}}, {Name: "b", Shape: []int{4}}, {Name: "c", Shape: []int{1, 1, 5}}}
	offsets, total := Layout(specs)
	if !slices.Equal(offsets, []int{0, 6, 10}) || total != 15 {
		t.Errorf("Layout = %v, %d; want [0 6 10], 15", offsets, total)
	}
}

// moments returns the mean and standard deviation of s.
func moments(s []float32) (mean, std float64) {
	for _, v := range s {
		mean += float64(v)
	}
	mean /= float64(len(s))
	for _, v := range s {
		std += (float64(v) - mean) * (float64(v) - mean)
	}
	return mean, math.Sqrt(std / float64(len(s)))
}

func TestInitStatistics(t *testing.T) {
	const out, in = 256, 784
	n := float64(out * in)
	cases := []struct {
		init   Init
		std    float64 // expected standard deviation
		bound  float64 // |value| must stay below it (uniforms)
		normal bool
	}{
		{HeNormal, math.Sqrt(2.0 / in), 0, true},
		{XavierNormal, math.Sqrt(2.0 / (in + out)), 0, true},
		{HeUniform, math.Sqrt(6.0/in) / math.Sqrt(3), math.Sqrt(6.0 / in), false},
		{XavierUniform, math.Sqrt(6.0/(in+out)) / math.Sqrt(3), math.Sqrt(6.0 / (in + out)), false},
	}
	for _, c := range cases {
		specs := []ParamSpec{
			{Name: "w", Shape: []int{out, in}, Init: c.init, FanIn: in, FanOut: out},
			{Name: "b", Shape: []int{out}, Init: Zeros, FanIn: in, FanOut: out},
		}
		dst := make([]float32, out*in+out)
		for i := range dst {
			dst[i] = 1 // Zeros must overwrite
		}
		InitParams(specs, 42, [][]float32{dst[:out*in], dst[out*in:]})
		mean, std := moments(dst[:out*in])
		// The sample mean's standard error is std/sqrt(n); allow 4 of them.
		if math.Abs(mean) > 4*c.std/math.Sqrt(n) {
			t.Errorf("init %d: mean %.3g, want 0 within %.3g", c.init, mean, 4*c.std/math.Sqrt(n))
		}
		if math.Abs(std/c.std-1) > 0.01 {
			t.Errorf("init %d: std %.5g, want %.5g within 1%%", c.init, std, c.std)
		}
		if c.bound > 0 {
			for _, v := range dst[:out*in] {
				if math.Abs(float64(v)) > c.bound {
					t.Fatalf("init %d: value %v outside ±%v", c.init, v, c.bound)
				}
			}
		}
		if c.normal { // a normal has about 4.55% of its mass beyond 2 std
			beyond := 0
			for _, v := range dst[:out*in] {
				if math.Abs(float64(v)) > 2*c.std {
					beyond++
				}
			}
			if f := float64(beyond) / n; math.Abs(f-0.0455) > 0.003 {
				t.Errorf("init %d: %.4f of values beyond 2 std, want 0.0455", c.init, f)
			}
		}
		for _, v := range dst[out*in:] {
			if v != 0 {
				t.Fatalf("bias not zeroed: %v", v)
			}
		}
	}
}

func TestInitDeterministic(t *testing.T) {
	m, err := MLP(Config{Input: []int{20}, Hidden: []int{16}, Classes: 4})
	if err != nil {
		t.Fatal(err)
	}
	specs := m.Params()
	_, total := Layout(specs)
	a, b, c := make([]float32, total), make([]float32, total), make([]float32, total)
	for _, run := range []struct {
		dst  []float32
		seed uint64
	}{{a, 7}, {b, 7}, {c, 8}} {
		InitParams(specs, run.seed, split(specs, run.dst))
	}
	if !slices.Equal(bits(a), bits(b)) {
		t.Error("the same seed gave different parameters")
	}
	if slices.Equal(bits(a[:320]), bits(c[:320])) {
		t.Error("seeds 7 and 8 gave the same fc1.weight")
	}
	// A parameter's values depend on its name and the seed, not its position.
	alone := make([]float32, 4*16)
	InitParams(specs[2:3], 7, [][]float32{alone})
	off, _ := Layout(specs)
	if !slices.Equal(bits(alone), bits(a[off[2]:off[2]+64])) {
		t.Error("fc2.weight initialised alone differs from fc2.weight in the model")
	}
	// Pinned bits: the generator must not change between Go versions.
	want := []uint32{0xbd6fbecc, 0xbece7822, 0x3f0b0e2b, 0xbdf629a6}
	if got := bits(a[:4]); !slices.Equal(got, want) {
		t.Errorf("first values of fc1.weight with seed 7 have bits %#x, want %#x", got, want)
	}
}

func bits(s []float32) []uint32 {
	out := make([]uint32, len(s))
	for i, v := range s {
		out[i] = math.Float32bits(v)
	}
	return out
}

// split cuts a flat arena into per-parameter slices as laid out by Layout.
func split(specs []ParamSpec, arena []float32) [][]float32 {
	offsets, _ := Layout(specs)
	out := make([][]float32, len(specs))
	for i, s := range specs {
		out[i] = arena[offsets[i] : offsets[i]+s.Size()]
	}
	return out
}

func TestInitPanics(t *testing.T) {
	ok := ParamSpec{Name: "w", Shape: []int{2, 2}, Init: HeNormal, FanIn: 2, FanOut: 2}
	for name, c := range map[string]struct {
		specs []ParamSpec
		dst   [][]float32
	}{
		"short dst":        {[]ParamSpec{ok}, [][]float32{make([]float32, 3)}},
		"too few dsts":     {[]ParamSpec{ok, ok}, [][]float32{make([]float32, 4)}},
		"zero fan-in":      {[]ParamSpec{{Name: "w", Shape: []int{2, 2}, Init: HeUniform}}, [][]float32{make([]float32, 4)}},
		"negative fan-out": {[]ParamSpec{{Name: "w", Shape: []int{2, 2}, Init: XavierNormal, FanIn: 4, FanOut: -1}}, [][]float32{make([]float32, 4)}},
		"unknown init":     {[]ParamSpec{{Name: "w", Shape: []int{2, 2}, Init: 99, FanIn: 2, FanOut: 2}}, [][]float32{make([]float32, 4)}},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "InitParams") {
					t.Errorf("%s: InitParams panicked with %v, want a message naming InitParams", name, r)
				}
			}()
			InitParams(c.specs, 1, c.dst)
		}()
	}
}
