package models

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/gradcheck"
)

// uniqueName gives each registration in this test binary its own name, so
// that the tests also pass with -count=N.
var registrations atomic.Int64

func uniqueName(prefix string) string { return fmt.Sprintf("%s-%d", prefix, registrations.Add(1)) }

func TestNewMLPDefaults(t *testing.T) {
	m, err := New("mlp", Config{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range m.Params() {
		got = append(got, fmt.Sprintf("%s%v", p.Name, p.Shape))
	}
	want := []string{"fc1.weight[256 784]", "fc1.bias[256]", "fc2.weight[256 256]", "fc2.bias[256]", "fc3.weight[10 256]", "fc3.bias[10]"}
	if !slices.Equal(got, want) {
		t.Errorf("params %v, want %v", got, want)
	}
	if d := m.Data(); m.Name() != "mlp" || d.Classes != 10 || !slices.Equal(d.Input, []int{784}) || d.Tokens || d.Targets != 1 {
		t.Errorf("name %q, data %+v; want mlp, 10 classes, float input [784], one target", m.Name(), d)
	}
	if inits := []Init{m.Params()[0].Init, m.Params()[4].Init}; inits[0] != HeNormal || inits[1] != XavierUniform {
		t.Errorf("fc1 init %d, fc3 init %d; want HeNormal before ReLU, XavierUniform for the logits", inits[0], inits[1])
	}
}

func TestNewMLPCustomSizes(t *testing.T) {
	m, err := New("mlp", Config{Input: []int{28, 28}, Hidden: []int{100}, Classes: 7})
	if err != nil {
		t.Fatal(err)
	}
	p := m.Params()
	if len(p) != 4 || !slices.Equal(p[0].Shape, []int{100, 784}) || !slices.Equal(p[2].Shape, []int{7, 100}) {
		t.Errorf("params %v", p)
	}
}

func TestNewErrors(t *testing.T) {
	_, err := New("resnet-9000", Config{})
	if err == nil || !strings.Contains(err.Error(), `"resnet-9000"`) || !strings.Contains(err.Error(), "mlp") {
		t.Errorf("New of an unknown model: %v; want an error naming it and listing mlp", err)
	}
	for _, cfg := range []Config{{Hidden: []int{256, 0}}, {Classes: -1}, {Input: []int{28, -28}}} {
		if _, err := New("mlp", cfg); err == nil {
			t.Errorf("New(mlp, %+v) succeeded", cfg)
		}
	}
	name := uniqueName("failing")
	boom := errors.New("boom")
	Register(name, func(Config) (Model, error) { return nil, boom })
	if _, err := New(name, Config{}); !errors.Is(err, boom) || !strings.Contains(err.Error(), name) {
		t.Errorf("New of a failing factory: %v; want it to wrap boom and name the model", err)
	}
}

func TestRegisterUserModel(t *testing.T) {
	name := uniqueName("tiny")
	var seen Config
	Register(name, func(cfg Config) (Model, error) {
		seen = cfg
		in := 1
		for _, d := range cfg.Input {
			in *= d
		}
		return NewClassifier(NewSequential(name, cfg.Input, cfg.Classes,
			NewLinear("hidden", in, 8, compute.Identity), NewReLU(), NewLinear("out", 8, cfg.Classes, compute.Identity))), nil
	})
	if !slices.Contains(Names(), name) || !slices.Contains(Names(), "mlp") || !slices.IsSorted(Names()) {
		t.Errorf("Names() = %v, want it sorted with %s and mlp", Names(), name)
	}
	m, err := New(name, Config{Options: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen.Input, []int{784}) || seen.Classes != 10 || seen.Options["k"] != "v" {
		t.Errorf("factory saw %+v, want defaults filled in and options passed", seen)
	}
	if n := len(m.Params()); n != 4 {
		t.Errorf("%d params, want 4", n)
	}
}

func TestRegisterPanics(t *testing.T) {
	f := func(Config) (Model, error) { return nil, nil }
	name := uniqueName("dup")
	Register(name, f)
	for what, call := range map[string]func(){
		"duplicate":   func() { Register(name, f) },
		"empty name":  func() { Register("", f) },
		"nil factory": func() { Register(uniqueName("nil"), nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register with a %s did not panic", what)
				}
			}()
			call()
		}()
	}
	// A factory that returns neither model nor error is reported.
	if _, err := New(name, Config{}); err == nil {
		t.Error("New of a factory returning nil, nil succeeded")
	}
}

func TestBuildErrors(t *testing.T) {
	e := gradcheck.Engines(t)["gonum"]
	m, err := MLP(Config{Input: []int{6}, Hidden: []int{4}, Classes: 3})
	if err != nil {
		t.Fatal(err)
	}
	specs := m.Params()
	a := newArenas(e, specs, rand.New(rand.NewPCG(1, 1)))
	if err := m.Build(e, a.pv[:3], a.gv[:3], 2); err == nil {
		t.Error("Build with too few views succeeded")
	}
	swapped := slices.Clone(a.pv)
	swapped[0], swapped[2] = swapped[2], swapped[0]
	if err := m.Build(e, swapped, a.gv, 2); err == nil || !strings.Contains(err.Error(), "fc1.weight") {
		t.Errorf("Build with a view of the wrong shape: %v; want an error naming fc1.weight", err)
	}
	if err := m.Build(e, a.pv, a.gv, 0); err == nil {
		t.Error("Build for batch 0 succeeded")
	}
	// Layers whose shapes do not chain.
	bad := NewSequential("bad", []int{6}, 3, NewLinear("a", 6, 4, compute.ReLU), NewLinear("b", 5, 3, compute.Identity))
	b := newArenas(e, bad.Params(), rand.New(rand.NewPCG(1, 1)))
	if err := bad.Build(e, b.pv, b.gv, 2); err == nil || !strings.Contains(err.Error(), "want 5") {
		t.Errorf("Build of unchained layers: %v", err)
	}
	// Names must be unique.
	dup := NewSequential("dup", []int{6}, 6, NewLinear("a", 6, 6, compute.ReLU), NewLinear("a", 6, 6, compute.Identity))
	d := newArenas(e, dup.Params(), rand.New(rand.NewPCG(1, 1)))
	if err := dup.Build(e, d.pv, d.gv, 2); err == nil || !strings.Contains(err.Error(), `"a.weight"`) {
		t.Errorf("Build with duplicate names: %v", err)
	}
	// The last layer must give Classes outputs.
	wrong := NewSequential("wrong", []int{6}, 3, NewLinear("a", 6, 4, compute.Identity))
	w := newArenas(e, wrong.Params(), rand.New(rand.NewPCG(1, 1)))
	if err := wrong.Build(e, w.pv, w.gv, 2); err == nil || !strings.Contains(err.Error(), "3 classes") {
		t.Errorf("Build with the wrong number of outputs: %v", err)
	}
}

// TestBuiltIn: the models of this package are built in, one a program
// registers is not, nor an unknown name.
func TestBuiltIn(t *testing.T) {
	name := uniqueName("own")
	Register(name, func(cfg Config) (Model, error) { return New("mlp", Config{}) })
	for _, c := range []struct {
		name string
		want bool
	}{{"mlp", true}, {"gpt-tiny", true}, {"gpt2-xl", true}, {"llama", true}, {"llama3-1b", true}, {name, false}, {"no-such-model", false}} {
		if got := BuiltIn(c.name); got != c.want {
			t.Errorf("BuiltIn(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}
