package ddp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/symddp/symddp/models"
)

// Hugging Face's LlamaForCausalLM layout (docs/LLAMA.md, "Import and
// export"): a directory with config.json (LlamaConfig's fields) and
// model.safetensors. symddp's Llama names its parameters as
// LlamaForCausalLM does and stores them as torch.nn.Linear does (out,in),
// and its RoPE pairs channels as rotate_half does, so every tensor maps
// one to one: no prefix, no transposition, no permutation of q_proj and
// k_proj. model.embed_tokens.weight and an untied lm_head.weight hold
// vocab_size rows; a tied head is absent (transformers does not save it).

// hfLlama is LlamaForCausalLM, loaded into and exported from symddp's
// Llama.
var hfLlama = hfArch{
	name: "Llama", kind: "Llama", class: llamaClass, modelType: "llama",
	embed: llamaEmbed, tiedHead: "lm_head.weight", tiedWhy: "the model ties its head to the embedding (tie_word_embeddings)",
	params: hfParamsOf(models.LlamaConfigOf, models.NewLlama), tensor: llamaTensor, ignored: llamaIgnored,
	parseConfig: func(b []byte) (hfFileConfig, error) { return parseLlamaConfig(b) },
	exportConfig: func(desc map[string]int, vocab int, dtype string) any {
		l, _ := models.LlamaConfigOf(desc) // checked by the export
		return llamaExportConfig(l, vocab, dtype)
	},
}

const (
	llamaClass = "LlamaForCausalLM"
	llamaEmbed = "model.embed_tokens.weight" // the token embedding's name
)

// llamaConfig is LlamaConfig as config.json writes it. Reading starts from
// LlamaConfig's defaults (llamaDefaults), as transformers does for a key
// that is missing; model_type has none: a config.json must say "llama"
// (or name LlamaForCausalLM in architectures).
type llamaConfig struct {
	Architectures         []string `json:"architectures,omitempty"`
	ModelType             string   `json:"model_type"`
	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      *int     `json:"num_key_value_heads"` // null: num_attention_heads
	HeadDim               *int     `json:"head_dim"`            // null: hidden_size/num_attention_heads
	HiddenAct             string   `json:"hidden_act"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RopeTheta             float64  `json:"rope_theta"`
	// RopeScaling is null or a scaled RoPE (Llama 3.1's rope_type llama3,
	// linear, dynamic, yarn ...); RopeParameters is where transformers 5
	// writes rope_theta and the scaling.
	RopeScaling       json.RawMessage `json:"rope_scaling"`
	RopeParameters    json.RawMessage `json:"rope_parameters,omitempty"`
	RMSNormEps        float32         `json:"rms_norm_eps"`
	TieWordEmbeddings bool            `json:"tie_word_embeddings"`
	AttentionBias     bool            `json:"attention_bias"`
	MLPBias           bool            `json:"mlp_bias"`
	AttentionDropout  float64         `json:"attention_dropout"`
	InitializerRange  float64         `json:"initializer_range"`
	PretrainingTP     int             `json:"pretraining_tp"`
	UseCache          bool            `json:"use_cache"`
	// BOSTokenID and EOSTokenID are an id, a list of ids (Llama 3's eos)
	// or null; the import does not read them.
	BOSTokenID any    `json:"bos_token_id"`
	EOSTokenID any    `json:"eos_token_id"`
	TorchDType string `json:"torch_dtype,omitempty"`
}

// llamaDefaults is LlamaConfig's defaults (transformers'
// configuration_llama.py): Llama 2 7B, with rms_norm_eps 1e-6.
func llamaDefaults() llamaConfig {
	return llamaConfig{VocabSize: 32000, HiddenSize: 4096, IntermediateSize: 11008, NumHiddenLayers: 32, NumAttentionHeads: 32,
		HiddenAct: "silu", MaxPositionEmbeddings: 2048, RopeTheta: 10000, RMSNormEps: 1e-6, InitializerRange: 0.02,
		PretrainingTP: 1, UseCache: true, BOSTokenID: 1, EOSTokenID: 2}
}

// parseLlamaConfig reads config.json's bytes over LlamaConfig's defaults.
func parseLlamaConfig(b []byte) (llamaConfig, error) {
	c := llamaDefaults()
	if err := json.Unmarshal(b, &c); err != nil {
		return llamaConfig{}, fmt.Errorf("not a LlamaConfig: %v", err)
	}
	return c, nil
}

// rows is vocab_size, the rows of the embedding and an untied head, and
// max_position_embeddings (no tensor has a row per position).
func (c llamaConfig) rows() (vocab, positions int) { return c.VocabSize, c.MaxPositionEmbeddings }

// check checks that a checkpoint of this config loads into a Llama of the
// sizes desc gives: a block that computes what symddp's does (unscaled
// RoPE, silu, no biases, the model's RMSNorm epsilon), the same sizes,
// rotary base and tie; at least the model's context in
// max_position_embeddings and at most its vocabulary (the rows above are
// zero).
func (c llamaConfig) check(desc map[string]int) error {
	l, err := models.LlamaConfigOf(desc)
	if err != nil {
		return err
	}
	theta, err := c.ropeTheta()
	kv := c.NumAttentionHeads
	if c.NumKeyValueHeads != nil {
		kv = *c.NumKeyValueHeads
	}
	switch {
	case c.ModelType != "llama" && !slices.Contains(c.Architectures, llamaClass):
		return fmt.Errorf("config.json has model_type %q, want \"llama\"", c.ModelType)
	case !jsonNull(c.RopeScaling):
		return fmt.Errorf("config.json has rope_scaling %s: symddp's Llama does not scale RoPE's frequencies (Llama 3.1's rope_type llama3, linear, dynamic, yarn); it loads rope_scaling null only",
			compactJSON(c.RopeScaling))
	case err != nil:
		return err
	case c.HiddenAct != "silu":
		return fmt.Errorf("config.json has hidden_act %q: symddp's Llama computes SwiGLU with silu", c.HiddenAct)
	case c.AttentionBias || c.MLPBias:
		return fmt.Errorf("config.json has attention_bias %v and mlp_bias %v: symddp's Llama has no biases", c.AttentionBias, c.MLPBias)
	case c.RMSNormEps != l.Eps():
		return fmt.Errorf("config.json has rms_norm_eps %g: symddp's Llama's RMSNorm uses %g", c.RMSNormEps, l.Eps())
	case theta != math.Trunc(theta):
		return fmt.Errorf("config.json has rope_theta %g: symddp's rotary embedding takes a whole number", theta)
	case c.NumHiddenLayers != l.Layers:
		return errConfigSize("num_hidden_layers", c.NumHiddenLayers, l.Layers, "--layers")
	case c.NumAttentionHeads != l.Heads:
		return errConfigSize("num_attention_heads", c.NumAttentionHeads, l.Heads, "--heads")
	case kv != l.KVHeads:
		return errConfigSize("num_key_value_heads", kv, l.KVHeads, "--kv-heads")
	case c.HiddenSize != l.Width:
		return errConfigSize("hidden_size", c.HiddenSize, l.Width, "--width")
	case c.HeadDim != nil && *c.HeadDim != l.Width/l.Heads:
		return fmt.Errorf("config.json has head_dim %d: symddp's Llama has heads of hidden_size/num_attention_heads = %d channels", *c.HeadDim, l.Width/l.Heads)
	case c.IntermediateSize != l.FFNHidden:
		return errConfigSize("intermediate_size", c.IntermediateSize, l.FFNHidden, "--ffn-hidden")
	case theta != l.RopeTheta:
		return fmt.Errorf("config.json has rope_theta %g, the model %g (--rope-theta %g)", theta, l.RopeTheta, theta)
	case c.TieWordEmbeddings != l.TiedEmbeddings:
		return fmt.Errorf("config.json has tie_word_embeddings %v, the model %v (the llama-124m and llama3-1b presets tie the head to the embedding, llama and llama-tiny do not)",
			c.TieWordEmbeddings, l.TiedEmbeddings)
	}
	return checkConfigRows("max_position_embeddings", c.MaxPositionEmbeddings, l.Context, c.VocabSize, l.Vocab)
}

// ropeTheta is rope_theta, or rope_parameters' where config.json has them
// (transformers 5 moves the rotary settings there); rope_parameters of
// another rope_type than "default", or with other keys (a scaling), are an
// error.
func (c llamaConfig) ropeTheta() (float64, error) {
	if jsonNull(c.RopeParameters) {
		return c.RopeTheta, nil
	}
	refuse := fmt.Errorf("config.json has rope_parameters %s: symddp's Llama does not scale RoPE's frequencies; it loads rope_type \"default\" with a rope_theta only",
		compactJSON(c.RopeParameters))
	var p map[string]any
	if json.Unmarshal(c.RopeParameters, &p) != nil {
		return 0, refuse
	}
	theta := c.RopeTheta
	for k, v := range p {
		switch f, isNum := v.(float64); {
		case k == "rope_type" && v == "default":
		case k == "rope_theta" && isNum:
			theta = f
		default:
			return 0, refuse
		}
	}
	return theta, nil
}

// jsonNull says whether a raw JSON value is absent or null.
func jsonNull(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || string(s) == "null"
}

// compactJSON is a raw JSON value on one line.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return strings.Join(strings.Fields(string(raw)), " ")
	}
	return b.String()
}

// llamaExportConfig is config.json for a Llama of l with vocab rows of its
// vocabulary: LlamaConfig's fields for its sizes, rope_scaling null.
func llamaExportConfig(l models.LlamaConfig, vocab int, dtype string) llamaConfig {
	kv, hs := l.KVHeads, l.Width/l.Heads
	eot := hfEndOfText(vocab)
	return llamaConfig{Architectures: []string{llamaClass}, ModelType: "llama", VocabSize: vocab,
		HiddenSize: l.Width, IntermediateSize: l.FFNHidden, NumHiddenLayers: l.Layers, NumAttentionHeads: l.Heads,
		NumKeyValueHeads: &kv, HeadDim: &hs, HiddenAct: "silu", MaxPositionEmbeddings: l.Context, RopeTheta: l.RopeTheta,
		RMSNormEps: l.Eps(), TieWordEmbeddings: l.TiedEmbeddings, InitializerRange: 0.02, PretrainingTP: 1, UseCache: true,
		BOSTokenID: eot, EOSTokenID: eot, TorchDType: hfTorchDTypes[dtype]}
}

// llamaTensor is where a Llama parameter lives in a LlamaForCausalLM file:
// under its own name and shape, the embedding's and the head's rows the
// vocabulary.
func llamaTensor(s models.ParamSpec) hfTensorMap {
	m := hfTensorMap{name: s.Name}
	if s.Name == llamaEmbed || s.Name == "lm_head.weight" {
		m.rows = rowsVocab
	}
	return m
}

// llamaIgnored reports whether a tensor of a LlamaForCausalLM file holds
// no parameter: the rotary frequencies (rotary_emb.inv_freq) that older
// transformers saved.
func llamaIgnored(name string) bool {
	return strings.HasSuffix(name, "rotary_emb.inv_freq") && strings.HasPrefix(name, "model.")
}
