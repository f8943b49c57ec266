package main

import (
	"fmt"
	"strconv"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// newResMLP builds "resmlp": a Linear+ReLU stem to width w, then blocks
// residual blocks x + fc2(relu(fc1(x))), then a Linear head, composed from
// the library's public layers only. Its settings come from --model-opt:
// width (default 64) and blocks (default 2). The input shape and the
// classes are the dataset's (train sizes the model from it).
//
//	x (B,in) -> stem (B,w) -> blocks x (B,w) -> head (B,classes)
func newResMLP(cfg models.Config) (models.Model, error) {
	width, err := intOption(cfg.Options, "width", 64)
	if err != nil {
		return nil, err
	}
	blocks, err := intOption(cfg.Options, "blocks", 2)
	if err != nil {
		return nil, err
	}
	for k := range cfg.Options {
		if k != "width" && k != "blocks" {
			return nil, fmt.Errorf("--model-opt %s: resmlp takes width and blocks", k)
		}
	}
	in := 1
	for _, d := range cfg.Input {
		in *= d
	}
	layers := []models.Layer{models.NewLinear("stem", in, width, compute.ReLU)}
	for b := range blocks {
		name := fmt.Sprintf("block%d", b)
		layers = append(layers, models.NewResidual(name,
			models.NewLinear(name+".fc1", width, width, compute.ReLU),
			models.NewLinear(name+".fc2", width, width, compute.Identity)))
	}
	layers = append(layers, models.NewLinear("head", width, cfg.Classes, compute.Identity))
	return models.NewClassifier(models.NewSequential("resmlp", cfg.Input, cfg.Classes, layers...)), nil
}

// intOption reads a positive integer setting, def when it is not given.
func intOption(opts map[string]string, key string, def int) (int, error) {
	s, ok := opts[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("--model-opt %s=%s: want a positive integer", key, s)
	}
	return n, nil
}
