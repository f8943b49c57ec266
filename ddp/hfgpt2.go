package ddp

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/symddp/symddp/models"
)

// Hugging Face's GPT2LMHeadModel layout (docs/GPT.md, "Import and export"):
// a directory with config.json (GPT2Config's fields) and model.safetensors.
// The tensors are GPT's parameters under the same names, prefixed
// "transformer." (files saved from a GPT2LMHeadModel; files of a bare
// GPT2Model, such as OpenAI's converted ones, have no prefix), wte and wpe
// with a ".weight" suffix, and every matrix of a block (attn.c_attn,
// attn.c_proj, mlp.c_fc, mlp.c_proj) transposed: GPT-2's Conv1D stores
// (in,out), symddp (out,in). wte holds vocab_size rows, wpe n_positions.

const (
	hfConfigFile = "config.json"
	hfModelFile  = "model.safetensors"
	hfPrefix     = "transformer."
)

// hfConfig is GPT2Config as config.json writes it. Reading starts from
// GPT2Config's defaults (hfDefaults), as transformers does for a key that
// is missing.
type hfConfig struct {
	Architectures              []string `json:"architectures,omitempty"`
	ModelType                  string   `json:"model_type"`
	VocabSize                  int      `json:"vocab_size"`
	NPositions                 int      `json:"n_positions"`
	NCtx                       int      `json:"n_ctx,omitempty"`
	NEmbd                      int      `json:"n_embd"`
	NLayer                     int      `json:"n_layer"`
	NHead                      int      `json:"n_head"`
	NInner                     *int     `json:"n_inner"`
	ActivationFunction         string   `json:"activation_function"`
	ResidPdrop                 float64  `json:"resid_pdrop"`
	EmbdPdrop                  float64  `json:"embd_pdrop"`
	AttnPdrop                  float64  `json:"attn_pdrop"`
	LayerNormEpsilon           float64  `json:"layer_norm_epsilon"`
	InitializerRange           float64  `json:"initializer_range"`
	ScaleAttnWeights           bool     `json:"scale_attn_weights"`
	ScaleAttnByInverseLayerIdx bool     `json:"scale_attn_by_inverse_layer_idx"`
	ReorderAndUpcastAttn       bool     `json:"reorder_and_upcast_attn"`
	TieWordEmbeddings          bool     `json:"tie_word_embeddings"`
	UseCache                   bool     `json:"use_cache"`
	BOSTokenID                 *int     `json:"bos_token_id,omitempty"`
	EOSTokenID                 *int     `json:"eos_token_id,omitempty"`
	TorchDType                 string   `json:"torch_dtype,omitempty"`
}

// hfDefaults is GPT2Config's defaults (transformers'
// configuration_gpt2.py): GPT-2 124M.
func hfDefaults() hfConfig {
	return hfConfig{ModelType: "gpt2", VocabSize: models.GPT2Tokens, NPositions: 1024, NEmbd: 768, NLayer: 12, NHead: 12,
		ActivationFunction: "gelu_new", ResidPdrop: 0.1, EmbdPdrop: 0.1, AttnPdrop: 0.1, LayerNormEpsilon: 1e-5,
		InitializerRange: 0.02, ScaleAttnWeights: true, TieWordEmbeddings: true, UseCache: true}
}

// parseHFConfig reads config.json's bytes over GPT2Config's defaults.
func parseHFConfig(b []byte) (hfConfig, error) {
	c := hfDefaults()
	if err := json.Unmarshal(b, &c); err != nil {
		return hfConfig{}, fmt.Errorf("not a GPT2Config: %v", err)
	}
	return c, nil
}

// gpt2Activations are activation_function values that compute GELU's tanh
// approximation, the one symddp's GPT computes.
var gpt2Activations = []string{"gelu_new", "gelu_pytorch_tanh", "gelu_fast"}

// checkAgainst checks that a checkpoint of this config loads into a GPT of
// g: the same layers, heads and width; at least g's positions (wpe's first
// g.Context rows are used) and at most g's vocabulary (the rows above are
// zero); and a block that computes what symddp's does.
func (c hfConfig) checkAgainst(g models.GPTConfig) error {
	size := func(field string, file, model int, flag string) error {
		return fmt.Errorf("config.json has %s %d, the model %d (%s %d)", field, file, model, flag, file)
	}
	switch {
	case c.ModelType != "gpt2":
		return fmt.Errorf("config.json has model_type %q, want \"gpt2\"", c.ModelType)
	case c.NLayer != g.Layers:
		return size("n_layer", c.NLayer, g.Layers, "--layers")
	case c.NHead != g.Heads:
		return size("n_head", c.NHead, g.Heads, "--heads")
	case c.NEmbd != g.Width:
		return size("n_embd", c.NEmbd, g.Width, "--width")
	case c.NPositions < g.Context:
		return fmt.Errorf("config.json has n_positions %d, fewer than the model's context of %d (--context %d or less)", c.NPositions, g.Context, c.NPositions)
	case c.VocabSize > g.Vocab:
		return fmt.Errorf("config.json has vocab_size %d, more than the model's vocabulary of %d (--vocab %d or more)", c.VocabSize, g.Vocab, c.VocabSize)
	case c.VocabSize < 1 || c.NPositions < 1:
		return fmt.Errorf("config.json has vocab_size %d and n_positions %d", c.VocabSize, c.NPositions)
	case c.NInner != nil && *c.NInner != 4*c.NEmbd:
		return fmt.Errorf("config.json has n_inner %d: symddp's GPT has an MLP of 4·n_embd = %d", *c.NInner, 4*c.NEmbd)
	case !slices.Contains(gpt2Activations, c.ActivationFunction):
		return fmt.Errorf("config.json has activation_function %q: symddp's GPT computes GELU's tanh approximation (%s)",
			c.ActivationFunction, strings.Join(gpt2Activations, ", "))
	case math.Abs(c.LayerNormEpsilon-1e-5) > 1e-12:
		return fmt.Errorf("config.json has layer_norm_epsilon %g: symddp's LayerNorm uses 1e-05", c.LayerNormEpsilon)
	case !c.ScaleAttnWeights || c.ScaleAttnByInverseLayerIdx:
		return fmt.Errorf("config.json has scale_attn_weights %v and scale_attn_by_inverse_layer_idx %v: symddp's attention scales by 1/sqrt(head size) only",
			c.ScaleAttnWeights, c.ScaleAttnByInverseLayerIdx)
	}
	return nil
}

// hfName is GPT2Model's name of GPT parameter name (without the
// "transformer." prefix), and whether the file stores it transposed
// (Conv1D): every matrix but the embeddings.
func hfName(name string, shape []int) (string, bool) {
	switch name {
	case "wte", "wpe":
		return name + ".weight", false
	}
	return name, len(shape) == 2
}

// hfIgnored reports whether a tensor of a GPT2LMHeadModel file holds no
// parameter: the causal-mask buffers attn.bias and attn.masked_bias that
// older transformers saved.
func hfIgnored(name string) bool {
	rest, ok := strings.CutPrefix(name, "h.")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, ".")
	return ok && (rest == "attn.bias" || rest == "attn.masked_bias")
}

// transpose writes src (rows,cols) into dst as (cols,rows).
func transpose(dst, src []float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		for c, v := range src[r*cols : (r+1)*cols] {
			dst[c*rows+r] = v
		}
	}
}

// gptLayout checks that specs are a GPT's parameters (names and shapes) of
// the sizes that d (ModelDescriber) gives, and returns those sizes.
func gptLayout(d map[string]int, specs []models.ParamSpec) (models.GPTConfig, error) {
	if d == nil {
		return models.GPTConfig{}, fmt.Errorf("it records no sizes (not a GPT)")
	}
	g, err := models.GPTConfigOf(d)
	if err != nil {
		return models.GPTConfig{}, fmt.Errorf("not a GPT: %w", err)
	}
	ref, err := models.NewGPT("", g)
	if err != nil {
		return models.GPTConfig{}, err
	}
	want := ref.Params()
	if len(specs) != len(want) {
		return models.GPTConfig{}, fmt.Errorf("%d parameters, a GPT of these sizes has %d (not a GPT)", len(specs), len(want))
	}
	for i, s := range specs {
		if s.Name != want[i].Name || !slices.Equal(s.Shape, want[i].Shape) {
			return models.GPTConfig{}, fmt.Errorf("parameter %d is %s %v, a GPT's is %s %v (not a GPT)", i, s.Name, s.Shape, want[i].Name, want[i].Shape)
		}
	}
	return g, nil
}
