package models

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

func init() {
	registerBuiltIn("mlp", func(cfg Config) (Model, error) {
		if cfg.Recompute != "" && cfg.Recompute != RecomputeNone {
			return nil, fmt.Errorf("recompute %s: the mlp has no transformer blocks to recompute (the gpt and llama models have)", cfg.Recompute)
		}
		m, err := MLP(cfg)
		if err != nil {
			return nil, err
		}
		return NewClassifier(m), nil
	})
}

// MLP is the multilayer perceptron registered as "mlp": the input is
// flattened, each hidden width is a Linear layer with fused ReLU (fc1, fc2,
// ...), and a last Linear layer gives the logits. Its defaults are 784
// inputs, hidden widths 256 and 256, and 10 classes.
func MLP(cfg Config) (*Sequential, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("mlp: %w", err)
	}
	hidden := cfg.Hidden
	if len(hidden) == 0 {
		hidden = []int{256, 256}
	}
	var layers []Layer
	in := size(cfg.Input)
	for i, h := range hidden {
		layers = append(layers, NewLinear(fmt.Sprintf("fc%d", i+1), in, h, compute.ReLU))
		in = h
	}
	layers = append(layers, NewLinear(fmt.Sprintf("fc%d", len(hidden)+1), in, cfg.Classes, compute.Identity))
	return NewSequential("mlp", cfg.Input, cfg.Classes, layers...), nil
}
