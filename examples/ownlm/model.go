package main

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// ownLMSize is ownlm's default shape: gpt-tiny's and llama-tiny's (4
// layers, 4 heads, width 128, context 128, the 256 byte values). The
// --layers, --heads, --width, --context, --vocab and --rope-theta flags
// change it.
var ownLMSize = models.Config{Layers: 4, Heads: 4, Width: 128, Context: 128, Vocab: 256, RopeTheta: 10000}

// newOwnLM builds "ownlm", a pre-norm decoder of the public layers alone:
//
//	tokens (B·T) -> embed (B·T,C)
//	-> layers x [ x + attn(layernorm(x)), x + proj(relu(fc(layernorm(x)))) ]
//	-> layernorm (B·T,C) -> head (B·T,V), not tied to embed
//
// attn is multi-query attention (every query head shares one key/value
// head) with the rotary embedding, so the model has no position table; the
// MLP is 2C wide with a ReLU and biases. Weights start N(0, 0.02), the
// residual outputs (o_proj, proj) N(0, 0.02/√(2·layers)); biases and norm
// gains are exempt from weight decay.
func newOwnLM(cfg models.Config) (models.Model, error) {
	switch {
	case cfg.KVHeads > 0:
		return nil, fmt.Errorf("key/value heads %d: ownlm's attention has one key/value head (multi-query)", cfg.KVHeads)
	case cfg.FFNHidden > 0:
		return nil, fmt.Errorf("hidden width %d: ownlm's MLP is twice its width", cfg.FFNHidden)
	}
	s := ownLMSize
	for _, o := range []struct{ dst, v *int }{
		{&s.Layers, &cfg.Layers}, {&s.Heads, &cfg.Heads}, {&s.Width, &cfg.Width}, {&s.Context, &cfg.Context}, {&s.Vocab, &cfg.Vocab},
	} {
		if *o.v > 0 {
			*o.dst = *o.v
		}
	}
	if cfg.RopeTheta > 0 {
		s.RopeTheta = cfg.RopeTheta
	}
	c, t := s.Width, s.Context
	if s.Heads < 1 || c%s.Heads != 0 || (c/s.Heads)%2 != 0 {
		return nil, fmt.Errorf("%d heads of width %d: the heads must divide the width into an even head size (the rotary embedding turns pairs)", s.Heads, c)
	}
	const std = 0.02
	out := std / math.Sqrt(2*float64(s.Layers))
	d, err := models.NewDecoder("ownlm", models.DecoderSpec{
		Vocab: s.Vocab, Context: t, Width: c, Layers: s.Layers,
		Embedding: "embed.weight", EmbeddingStd: std,
		LayerPrefix: "layers",
		Block: func(i int, _ *models.ScratchPool) []models.Layer {
			p := fmt.Sprintf("layers.%d.", i)
			fc := models.NewLinear(p+"mlp.fc", c, 2*c, compute.ReLU) // bias and ReLU in one pass
			proj := models.NewLinear(p+"mlp.proj", 2*c, c, compute.Identity)
			fc.WeightInit, fc.WeightStd = models.Normal, std
			proj.WeightInit, proj.WeightStd = models.Normal, out
			return []models.Layer{
				models.NewResidual(p+"attn",
					models.NewLayerNorm(p+"ln_1", c),
					models.NewGroupedSelfAttention(p+"attn", t, c, s.Heads, 1, s.RopeTheta, std, out)),
				models.NewResidual(p+"mlp", models.NewLayerNorm(p+"ln_2", c), fc, proj),
			}
		},
		Norm:           func() models.Layer { return models.NewLayerNorm("ln_f", c) },
		Head:           "head",
		HeadStd:        std,
		NoDecayVectors: true,
	})
	if err != nil {
		return nil, err
	}
	return d, d.SetRecompute(cfg.Recompute)
}
