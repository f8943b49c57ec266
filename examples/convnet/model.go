package main

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// Registering the model makes models.New("convnet", cfg) build it, and so a
// training command that imports this package finds it by name, as
// `train --model mlp` finds the built-in MLP.
func init() {
	models.Register("convnet", NewConvNet)
}

// DefaultChannels are the widths of the convolution blocks when the Config
// gives no Hidden sizes.
var DefaultChannels = []int{8, 16}

// NewConvNet builds the model registered as "convnet": for every width in
// cfg.Hidden (default DefaultChannels) a block of a 3×3 convolution with
// same padding and ReLU and a 2×2 max pooling, then a Linear layer from the
// flattened feature maps to the classes:
//
//	(1,28,28) -conv1+relu-> (8,28,28) -pool-> (8,14,14)
//	          -conv2+relu-> (16,14,14) -pool-> (16,7,7) -fc-> (10)
//
// cfg.Input is (C,H,W), or (H·W) for a square one-channel image such as a
// flattened 28×28 Fashion-MNIST picture.
func NewConvNet(cfg models.Config) (models.Model, error) {
	in, err := imageShape(cfg.Input)
	if err != nil {
		return nil, err
	}
	widths := cfg.Hidden
	if len(widths) == 0 {
		widths = DefaultChannels
	}
	c, h, w := in[0], in[1], in[2]
	var layers []models.Layer
	for i, f := range widths {
		if h < 2 || w < 2 {
			return nil, fmt.Errorf("convnet: %d blocks pool a %dx%d image down to nothing", len(widths), in[1], in[2])
		}
		layers = append(layers,
			NewConv2D(fmt.Sprintf("conv%d", i+1), c, f, 3, Same, compute.ReLU),
			NewMaxPool2D())
		c, h, w = f, h/2, w/2
	}
	layers = append(layers, models.NewLinear("fc", c*h*w, cfg.Classes, compute.Identity))
	return models.NewClassifier(models.NewSequential("convnet", in, cfg.Classes, layers...)), nil
}

// imageShape reads a sample shape as (C,H,W).
func imageShape(shape []int) ([]int, error) {
	switch len(shape) {
	case 3:
		return append([]int(nil), shape...), nil
	case 1:
		for s := 1; s*s <= shape[0]; s++ {
			if s*s == shape[0] {
				return []int{1, s, s}, nil
			}
		}
	}
	return nil, fmt.Errorf("convnet: input shape %v: want (C,H,W) or the size of a square image", shape)
}
