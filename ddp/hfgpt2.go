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

// hfPrefix starts the names of a GPT2LMHeadModel file's parameters.
const hfPrefix = "transformer."

// hfGPT2 is GPT2LMHeadModel, loaded into and exported from symddp's GPT.
var hfGPT2 = hfArch{
	name: "GPT-2", kind: "GPT", class: "GPT2LMHeadModel", modelType: "gpt2", prefix: hfPrefix,
	embed: "wte", tiedHead: "lm_head.weight", tiedWhy: "symddp's GPT ties its head to wte",
	params: hfParamsOf(models.GPTConfigOf, models.NewGPT), tensor: gpt2Tensor, ignored: gpt2Ignored,
	parseConfig: func(b []byte) (hfFileConfig, error) { return parseGPT2Config(b) },
	exportConfig: func(desc map[string]int, vocab int, dtype string) any {
		g, _ := models.GPTConfigOf(desc) // checked by the export
		return gpt2ExportConfig(g, vocab, dtype)
	},
}

// gpt2Config is GPT2Config as config.json writes it. Reading starts from
// GPT2Config's defaults (gpt2Defaults), as transformers does for a key that
// is missing.
type gpt2Config struct {
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

// gpt2Defaults is GPT2Config's defaults (transformers'
// configuration_gpt2.py): GPT-2 124M.
func gpt2Defaults() gpt2Config {
	return gpt2Config{ModelType: "gpt2", VocabSize: models.GPT2Tokens, NPositions: 1024, NEmbd: 768, NLayer: 12, NHead: 12,
		ActivationFunction: "gelu_new", ResidPdrop: 0.1, EmbdPdrop: 0.1, AttnPdrop: 0.1, LayerNormEpsilon: 1e-5,
		InitializerRange: 0.02, ScaleAttnWeights: true, TieWordEmbeddings: true, UseCache: true}
}

// parseGPT2Config reads config.json's bytes over GPT2Config's defaults.
func parseGPT2Config(b []byte) (gpt2Config, error) {
	c := gpt2Defaults()
	if err := json.Unmarshal(b, &c); err != nil {
		return gpt2Config{}, fmt.Errorf("not a GPT2Config: %v", err)
	}
	return c, nil
}

// gpt2Activations are activation_function values that compute GELU's tanh
// approximation, the one symddp's GPT computes.
var gpt2Activations = []string{"gelu_new", "gelu_pytorch_tanh", "gelu_fast"}

// rows is vocab_size and n_positions: the rows of wte and wpe.
func (c gpt2Config) rows() (vocab, positions int) { return c.VocabSize, c.NPositions }

// check checks that a checkpoint of this config loads into a GPT of the
// sizes desc gives: the same layers, heads and width; at least its
// positions (wpe's first Context rows are used) and at most its
// vocabulary (the rows above are zero); and a block that computes what
// symddp's does.
func (c gpt2Config) check(desc map[string]int) error {
	g, err := models.GPTConfigOf(desc)
	if err != nil {
		return err
	}
	switch {
	case c.ModelType != "gpt2":
		return fmt.Errorf("config.json has model_type %q, want \"gpt2\"", c.ModelType)
	case c.NLayer != g.Layers:
		return errConfigSize("n_layer", c.NLayer, g.Layers, "--layers")
	case c.NHead != g.Heads:
		return errConfigSize("n_head", c.NHead, g.Heads, "--heads")
	case c.NEmbd != g.Width:
		return errConfigSize("n_embd", c.NEmbd, g.Width, "--width")
	}
	if err := checkConfigRows("n_positions", c.NPositions, g.Context, c.VocabSize, g.Vocab); err != nil {
		return err
	}
	switch {
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

// gpt2ExportConfig is config.json for a GPT of g with vocab rows of wte.
func gpt2ExportConfig(g models.GPTConfig, vocab int, dtype string) gpt2Config {
	c := gpt2Defaults()
	c.Architectures = []string{"GPT2LMHeadModel"}
	c.VocabSize, c.NPositions, c.NCtx = vocab, g.Context, g.Context
	c.NEmbd, c.NLayer, c.NHead = g.Width, g.Layers, g.Heads
	c.ResidPdrop, c.EmbdPdrop, c.AttnPdrop = 0, 0, 0
	eot := hfEndOfText(vocab)
	c.BOSTokenID, c.EOSTokenID = eot, eot
	c.TorchDType = hfTorchDTypes[dtype]
	return c
}

// gpt2Tensor is where a GPT parameter lives in a GPT2Model file: under
// its own name (wte and wpe with a ".weight" suffix, wte's rows the
// vocabulary, wpe's the positions), every matrix but the embeddings
// transposed (Conv1D).
func gpt2Tensor(s models.ParamSpec) hfTensorMap {
	switch s.Name {
	case "wte":
		return hfTensorMap{name: "wte.weight", rows: rowsVocab}
	case "wpe":
		return hfTensorMap{name: "wpe.weight", rows: rowsPositions}
	}
	return hfTensorMap{name: s.Name, transposed: len(s.Shape) == 2}
}

// gpt2Ignored reports whether a tensor of a GPT2LMHeadModel file holds no
// parameter: the causal-mask buffers attn.bias and attn.masked_bias that
// older transformers saved.
func gpt2Ignored(name string) bool {
	rest, ok := strings.CutPrefix(name, "h.")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, ".")
	return ok && (rest == "attn.bias" || rest == "attn.masked_bias")
}
