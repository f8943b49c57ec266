package main

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// ownLMSize is ownlm's default shape: gpt-tiny's (4 layers, 4 heads,
// width 128, context 128, the 256 byte values). The --layers, --heads,
// --width, --context and --vocab flags change it.
var ownLMSize = models.Config{Layers: 4, Heads: 4, Width: 128, Context: 128, Vocab: 256}

// newOwnLM builds "ownlm", a pre-norm decoder of the public layers alone:
//
//	tokens (B·T) -> embed + pos (B·T,C)
//	-> layers x [ x + o_proj(attn(qkv(layernorm(x)))), x + mlp(layernorm(x)) ]
//	-> layernorm (B·T,C) -> head (B·T,V), not tied to embed
//
// attn is causal multi-head attention over learned positions; the MLP is
// GELU, 2C wide (GPT-2's is 4C), with biases. Weights start N(0, 0.02), the
// residual outputs (o_proj, mlp.c_proj) N(0, 0.02/√(2·layers)); biases and
// norm gains are exempt from weight decay. Every layer has a bf16 form, so
// on the GPU it trains in bf16 through the layers' plans (--precision).
func newOwnLM(cfg models.Config) (models.Model, error) {
	switch {
	case cfg.KVHeads > 0:
		return nil, fmt.Errorf("key/value heads %d: ownlm's attention has as many key/value heads as queries", cfg.KVHeads)
	case cfg.FFNHidden > 0:
		return nil, fmt.Errorf("hidden width %d: ownlm's MLP is twice its width", cfg.FFNHidden)
	case cfg.RopeTheta > 0:
		return nil, fmt.Errorf("rope theta %g: ownlm has learned positions, no rotary embedding", cfg.RopeTheta)
	}
	s := ownLMSize
	for _, o := range []struct{ dst, v *int }{
		{&s.Layers, &cfg.Layers}, {&s.Heads, &cfg.Heads}, {&s.Width, &cfg.Width}, {&s.Context, &cfg.Context}, {&s.Vocab, &cfg.Vocab},
	} {
		if *o.v > 0 {
			*o.dst = *o.v
		}
	}
	c, t := s.Width, s.Context
	if s.Heads < 1 || c%s.Heads != 0 {
		return nil, fmt.Errorf("%d heads of width %d: the heads must divide the width", s.Heads, c)
	}
	const std = 0.02
	out := std / math.Sqrt(2*float64(s.Layers))
	linear := func(name string, in, outw int, sd float64) *models.Linear {
		l := models.NewLinear(name, in, outw, compute.Identity)
		l.WeightInit, l.WeightStd = models.Normal, sd
		return l
	}
	d, err := models.NewDecoder("ownlm", models.DecoderSpec{
		Vocab: s.Vocab, Context: t, Width: c, Layers: s.Layers,
		Embedding: "embed.weight", EmbeddingStd: std, Positions: "pos.weight", PositionStd: std,
		LayerPrefix: "layers",
		Block: func(i int, _ *models.ScratchPool) []models.Layer {
			p := fmt.Sprintf("layers.%d.", i)
			return []models.Layer{
				models.NewResidual(p+"attn",
					models.NewLayerNorm(p+"ln_1", c),
					linear(p+"attn.qkv", c, 3*c, std),
					models.NewCausalSelfAttention(p+"attn", t, c, s.Heads),
					linear(p+"attn.o_proj", c, c, out)),
				models.NewResidual(p+"mlp", models.NewLayerNorm(p+"ln_2", c), models.NewGELUMLP(p+"mlp", c, 2*c, std, out)),
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
	if err := d.SetPrecision(cfg.Precision); err != nil {
		return nil, err
	}
	return d, d.SetRecompute(cfg.Recompute)
}
