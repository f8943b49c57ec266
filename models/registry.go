package models

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/symddp/symddp/compute"
)

// Config is what a model is built from: the data's shapes and the
// command line's model settings.
type Config struct {
	// Input is the shape of one sample; New defaults it to [784].
	Input []int
	// Classes is the number of classes; New defaults it to 10.
	Classes int
	// Hidden are the widths of the hidden layers; empty means the model's
	// default (256, 256 for mlp).
	Hidden []int
	// Layers, Heads, Width, Context and Vocab size a transformer (gpt,
	// llama); zero keeps the preset's value.
	Layers, Heads, Width, Context, Vocab int
	// KVHeads is a Llama's number of key/value heads (grouped-query
	// attention: Heads must be a multiple of it), FFNHidden its SwiGLU
	// hidden width and RopeTheta its rotary embedding's base; zero keeps
	// the preset's value (for FFNHidden: Llama's rule from the width). A
	// GPT has none of them and refuses them.
	KVHeads, FFNHidden int
	RopeTheta          float64
	// Precision is how a transformer computes (compute.PrecisionAuto:
	// bf16 where the engine has a bf16 form of every layer at the model's
	// sizes, compute.BF16Tensors; fp32 elsewhere).
	Precision compute.Precision
	// Recompute is which activations a transformer recomputes in backward
	// instead of keeping them ("" or RecomputeNone: none). A model without
	// transformer blocks refuses any other mode.
	Recompute Recompute
	// Options are free-form settings for models a program registers
	// (train's --model-opt key=value); the built-in models (BuiltIn) read none.
	Options map[string]string
}

// Factory builds a model from a Config.
type Factory func(cfg Config) (Model, error)

var registry = struct {
	sync.Mutex
	m       map[string]Factory
	builtIn map[string]bool // registered by this package (BuiltIn)
}{m: map[string]Factory{}, builtIn: map[string]bool{}}

// Register makes a model available to New (and train's --model) under name.
// It panics when name is empty or already registered, or f is nil; call it
// from an init function or from main before traincmd.Main (every PE runs
// main again, so the PEs have it too).
func Register(name string, f Factory) {
	if name == "" || f == nil {
		panic("models: Register with an empty name or a nil factory")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[name]; dup {
		panic(fmt.Sprintf("models: model %q registered twice", name))
	}
	registry.m[name] = f
}

// registerBuiltIn registers a model of this package: mlp and the gpt and
// llama presets (BuiltIn).
func registerBuiltIn(name string, f Factory) {
	Register(name, f)
	registry.Lock()
	defer registry.Unlock()
	registry.builtIn[name] = true
}

// BuiltIn reports whether the model registered under name is one of this
// package's (mlp, the gpt and llama presets), sized by Config's fields,
// rather than one a program registered, whose settings come in
// Config.Options: the built-in models read no Options.
func BuiltIn(name string) bool {
	registry.Lock()
	defer registry.Unlock()
	return registry.builtIn[name]
}

// Names lists the registered models, sorted.
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	return slices.Sorted(maps.Keys(registry.m))
}

// New builds the model registered under name from cfg, after filling in
// cfg's defaults and checking its sizes.
func New(name string, cfg Config) (Model, error) {
	registry.Lock()
	f, ok := registry.m[name]
	registry.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown model %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	m, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	if m == nil {
		return nil, fmt.Errorf("model %s: factory returned no model", name)
	}
	return m, nil
}

// withDefaults returns a copy of c with defaults filled in, or an error for
// sizes that are not positive.
func (c Config) withDefaults() (Config, error) {
	out := c
	out.Input, out.Hidden, out.Options = slices.Clone(c.Input), slices.Clone(c.Hidden), maps.Clone(c.Options)
	if len(out.Input) == 0 {
		out.Input = []int{784}
	}
	if out.Classes == 0 {
		out.Classes = 10
	}
	if out.Classes < 0 {
		return Config{}, fmt.Errorf("%d classes", out.Classes)
	}
	for _, d := range out.Input {
		if d <= 0 {
			return Config{}, fmt.Errorf("input shape %v", out.Input)
		}
	}
	for _, h := range out.Hidden {
		if h <= 0 {
			return Config{}, fmt.Errorf("hidden sizes %v", out.Hidden)
		}
	}
	if out.Layers < 0 || out.Heads < 0 || out.Width < 0 || out.Context < 0 || out.Vocab < 0 {
		return Config{}, fmt.Errorf("layers %d, heads %d, width %d, context %d, vocabulary %d: must not be negative",
			out.Layers, out.Heads, out.Width, out.Context, out.Vocab)
	}
	r, err := ParseRecompute(string(out.Recompute))
	if err != nil {
		return Config{}, err
	}
	out.Recompute = r
	if math.IsNaN(out.RopeTheta) { // NaN passes the comparisons below, then reads as 0: the preset's
		return Config{}, errors.New("rope theta NaN: want a whole number above 1 (0: the preset's)")
	}
	if out.KVHeads < 0 || out.FFNHidden < 0 || out.RopeTheta < 0 {
		return Config{}, fmt.Errorf("key/value heads %d, SwiGLU hidden width %d, rope theta %g: must not be negative",
			out.KVHeads, out.FFNHidden, out.RopeTheta)
	}
	return out, nil
}
