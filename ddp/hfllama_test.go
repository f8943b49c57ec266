package ddp

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/models"
)

// testLlama is a Llama of cfg with random parameters, and its checkpoint.
func testLlama(t *testing.T, cfg models.LlamaConfig) (*models.Llama, []float32, *Weights) {
	t.Helper()
	m, err := models.NewLlama("llama", cfg)
	require.NoError(t, err)
	arena, w := testCheckpoint(t, m)
	return m, arena, w
}

// smallLlama has a tied head, grouped key/value heads and Llama 3's θ.
var smallLlama = models.LlamaConfig{Layers: 2, Width: 16, Heads: 4, KVHeads: 2, FFNHidden: 40, Context: 8, Vocab: 256,
	RopeTheta: 500000, TiedEmbeddings: true}

// Export to LlamaForCausalLM and import again gives the same parameter
// bits: for llama-tiny (untied head); for a tied one, whose head is not
// written; for one with GPT-2's padded vocabulary, whose 47 padding rows
// of the embedding and of the untied head are not exported and come back
// zero; and in bf16, each value rounded.
func TestHFLlamaRoundTrip(t *testing.T) {
	gpt2Vocab := models.LlamaConfig{Layers: 1, Width: 16, Heads: 2, KVHeads: 1, FFNHidden: 32, Context: 8,
		Vocab: models.GPT2.Vocab, RopeTheta: 10000}
	for _, c := range []struct {
		name      string
		cfg       models.LlamaConfig
		dtype     string
		wantVocab int
	}{
		{"llama-tiny", models.LlamaTiny, "", 256},
		{"tied", smallLlama, "", 256},
		{"gpt2-vocab", gpt2Vocab, "", models.GPT2Tokens},
		{"bf16", smallLlama, "BF16", 256},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, arena, w := testLlama(t, c.cfg)
			l := m.Config()
			dir := filepath.Join(t.TempDir(), "hf")
			got, err := ExportHF(w, dir, HFExportOptions{DType: c.dtype})
			require.NoError(t, err)
			assert.Equal(t, "LlamaForCausalLM", got.Class)
			assert.Equal(t, c.wantVocab, got.Vocab)
			assert.Equal(t, len(m.Params()), got.Tensors)

			want := slices.Clone(arena)
			specs := m.Params()
			offsets, _ := models.Layout(specs)
			for i, s := range specs {
				if s.Name == llamaEmbed || s.Name == "lm_head.weight" {
					clear(want[offsets[i]+c.wantVocab*l.Width : offsets[i]+s.Size()]) // rows above vocab_size
				}
			}
			back := requireImport(t, dir, m, want, c.dtype)

			// the file is LlamaForCausalLM's: the parameters' own names and
			// (out,in) shapes, the head only when untied
			b, f := readHFFile(t, dir)
			C, hs := l.Width, l.Width/l.Heads
			shapes := map[string][]int{
				"model.embed_tokens.weight": {c.wantVocab, C}, "model.layers.0.input_layernorm.weight": {C},
				"model.layers.0.self_attn.q_proj.weight": {C, C}, "model.layers.0.self_attn.k_proj.weight": {l.KVHeads * hs, C},
				"model.layers.0.self_attn.o_proj.weight": {C, C}, "model.layers.0.mlp.gate_proj.weight": {l.FFNHidden, C},
				"model.layers.0.mlp.down_proj.weight": {C, l.FFNHidden}, "model.norm.weight": {C},
			}
			if !l.TiedEmbeddings {
				shapes["lm_head.weight"] = []int{c.wantVocab, C}
			}
			for name, shape := range shapes {
				assert.Equal(t, shape, f.Entries[name].Shape, name)
				assert.Equal(t, map[string]string{"": "F32", "BF16": "BF16"}[c.dtype], f.Entries[name].DType, name)
			}
			assert.Len(t, f.Entries, len(specs))
			if l.TiedEmbeddings {
				assert.NotContains(t, f.Entries, "lm_head.weight")
			}
			assert.Equal(t, map[string]string{"format": "pt"}, f.Meta)

			var cfg map[string]any
			cb, err := os.ReadFile(filepath.Join(dir, hfConfigFile))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(cb, &cfg))
			eot := any(nil)
			if c.wantVocab == models.GPT2Tokens {
				eot = float64(models.GPT2Tokens - 1)
			}
			for k, v := range map[string]any{"model_type": "llama", "num_hidden_layers": float64(l.Layers),
				"num_attention_heads": float64(l.Heads), "num_key_value_heads": float64(l.KVHeads), "hidden_size": float64(C),
				"head_dim": float64(hs), "intermediate_size": float64(l.FFNHidden), "max_position_embeddings": float64(l.Context),
				"vocab_size": float64(c.wantVocab), "rope_theta": l.RopeTheta, "rope_scaling": nil, "rms_norm_eps": 1e-5,
				"tie_word_embeddings": l.TiedEmbeddings, "hidden_act": "silu", "attention_bias": false, "mlp_bias": false,
				"bos_token_id": eot, "eos_token_id": eot,
				"torch_dtype": map[string]any{"": "float32", "BF16": "bfloat16"}[c.dtype]} {
				assert.Equal(t, v, cfg[k], k)
			}
			assert.Contains(t, cfg, "rope_scaling")
			assert.Equal(t, []any{"LlamaForCausalLM"}, cfg["architectures"])

			// exporting what was imported writes the same bytes
			if c.dtype == "" && c.wantVocab == l.Vocab {
				require.True(t, bytes.Equal(b, reexport(t, m, back, ExportHF, HFExportOptions{})), "re-exported model.safetensors differs")
			}
		})
	}
}

// llamaFixture exports smallLlama's checkpoint and returns the model, the
// Hugging Face directory and the arena that imports from it.
func llamaFixture(t *testing.T) (*models.Llama, string, []float32) {
	t.Helper()
	m, _, w := testLlama(t, smallLlama)
	dir := filepath.Join(t.TempDir(), "hf")
	_, err := ExportHF(w, dir, HFExportOptions{})
	require.NoError(t, err)
	arena, err := ReadInitWeights(dir, m)
	require.NoError(t, err)
	return m, dir, arena
}

// Files and configs as other tools write them import too: the rotary
// frequency buffers older transformers saved, a saved lm_head.weight equal
// to the tied embedding, F16 tensors, Llama 3's list of eos ids, more
// positions than the model's context, transformers 5's rope_parameters in
// place of rope_theta, num_key_value_heads left out when it equals the
// heads, and a config.json that names the class but not the model_type.
func TestHFLlamaImportVariants(t *testing.T) {
	m, dir, arena := llamaFixture(t)
	for _, c := range []struct {
		name    string
		tensors func([]stTensor) []stTensor
		config  func(map[string]any)
	}{
		{"buffers and head", func(ts []stTensor) []stTensor {
			for _, s := range slices.Clone(ts) {
				if s.Name == llamaEmbed {
					head := s
					head.Name = "lm_head.weight"
					ts = append(ts, head)
				}
			}
			return append(ts, stTensor{Name: "model.layers.1.self_attn.rotary_emb.inv_freq", Shape: []int{2}, Data: []float32{1, 0.01}})
		}, nil},
		{"config", nil, func(c map[string]any) {
			c["eos_token_id"] = []any{1.0, 2.0}
			c["max_position_embeddings"] = 131072
			delete(c, "rope_theta")
			c["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 500000.0}
			delete(c, "model_type")
			delete(c, "head_dim")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadInitWeights(rewriteHF(t, dir, c.tensors, c.config), m)
			require.NoError(t, err)
			assert.Equal(t, arena, got)
		})
	}

	half := rewriteHF(t, dir, func(ts []stTensor) []stTensor {
		for i := range ts {
			ts[i] = decoded(t, ts[i], "F16")
		}
		return ts
	}, nil)
	got, err := ReadInitWeights(half, m)
	require.NoError(t, err)
	for i, v := range arena {
		require.Equal(t, f16ToF32(f16FromF32(v)), got[i], "element %d", i)
	}

	mha := smallLlama
	mha.KVHeads = mha.Heads
	m2, _, w := testLlama(t, mha)
	dir2 := filepath.Join(t.TempDir(), "hf")
	_, err = ExportHF(w, dir2, HFExportOptions{})
	require.NoError(t, err)
	want, err := ReadInitWeights(dir2, m2)
	require.NoError(t, err)
	got, err = ReadInitWeights(rewriteHF(t, dir2, nil, func(c map[string]any) { delete(c, "num_key_value_heads") }), m2)
	require.NoError(t, err)
	assert.Equal(t, want, got, "num_key_value_heads defaults to num_attention_heads")
}

// Each fault in a LlamaForCausalLM directory is one line naming the file
// and the tensor or the config.json field.
func TestHFLlamaImportErrors(t *testing.T) {
	m, dir, _ := llamaFixture(t)
	file := func(d string) string { return filepath.Join(d, hfModelFile) }
	set := func(k string, v any) func(map[string]any) { return func(c map[string]any) { c[k] = v } }
	for _, c := range []struct {
		name    string
		tensors func([]stTensor) []stTensor
		config  func(map[string]any)
		want    string // after the file or the directory
	}{
		{"missing tensor", replaceTensor("model.layers.1.mlp.up_proj.weight", func(stTensor) stTensor { return stTensor{} }), nil,
			`tensor "model.layers.1.mlp.up_proj.weight" is missing`},
		{"wrong shape", replaceTensor("model.layers.0.self_attn.k_proj.weight", func(s stTensor) stTensor { s.Shape = []int{16, 8}; return s }), nil,
			`tensor "model.layers.0.self_attn.k_proj.weight" has shape [16 8], want [8 16]`},
		{"int64", replaceTensor("model.norm.weight", func(s stTensor) stTensor {
			return stTensor{Name: s.Name, Shape: s.Shape, DType: "I64", Raw: make([]byte, 8*16)}
		}), nil, `tensor "model.norm.weight" is I64, want F32, BF16 or F16`},
		{"extra layer", func(ts []stTensor) []stTensor {
			return append(ts, stTensor{Name: "model.layers.2.input_layernorm.weight", Shape: []int{16}, Data: make([]float32, 16)})
		}, nil, `tensor "model.layers.2.input_layernorm.weight" is not a parameter of a Llama of 2 layers`},
		{"untied head", func(ts []stTensor) []stTensor {
			return append(ts, stTensor{Name: "lm_head.weight", Shape: []int{256, 16}, Data: make([]float32, 256*16)})
		}, nil, `tensor "lm_head.weight" differs from "model.embed_tokens.weight": the model ties its head to the embedding (tie_word_embeddings)`},
		{"rope_scaling", nil, set("rope_scaling", map[string]any{"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
			"original_max_position_embeddings": 8192, "rope_type": "llama3"}),
			`config.json has rope_scaling {"factor":32,"high_freq_factor":4,"low_freq_factor":1,"original_max_position_embeddings":8192,"rope_type":"llama3"}: symddp's Llama does not scale RoPE's frequencies (Llama 3.1's rope_type llama3, linear, dynamic, yarn); it loads rope_scaling null only`},
		{"rope_parameters", nil, set("rope_parameters", map[string]any{"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}),
			`config.json has rope_parameters {"factor":2,"rope_theta":500000,"rope_type":"linear"}: symddp's Llama does not scale RoPE's frequencies; it loads rope_type "default" with a rope_theta only`},
		{"rms_norm_eps", nil, func(c map[string]any) { delete(c, "rms_norm_eps") }, // LlamaConfig's default: 1e-6
			`config.json has rms_norm_eps 1e-06: symddp's Llama's RMSNorm uses 1e-05`},
		{"hidden_act", nil, set("hidden_act", "gelu"), `config.json has hidden_act "gelu": symddp's Llama computes SwiGLU with silu`},
		{"biases", nil, set("attention_bias", true), `config.json has attention_bias true and mlp_bias false: symddp's Llama has no biases`},
		{"layers", nil, set("num_hidden_layers", 16), `config.json has num_hidden_layers 16, the model 2 (--layers 16)`},
		{"kv heads", nil, set("num_key_value_heads", 4), `config.json has num_key_value_heads 4, the model 2 (--kv-heads 4)`},
		{"width", nil, set("hidden_size", 32), `config.json has hidden_size 32, the model 16 (--width 32)`},
		{"head_dim", nil, set("head_dim", 8), `config.json has head_dim 8: symddp's Llama has heads of hidden_size/num_attention_heads = 4 channels`},
		{"ffn", nil, set("intermediate_size", 64), `config.json has intermediate_size 64, the model 40 (--ffn-hidden 64)`},
		{"theta", nil, set("rope_theta", 10000.0), `config.json has rope_theta 10000, the model 500000 (--rope-theta 10000)`},
		{"tie", nil, set("tie_word_embeddings", false),
			`config.json has tie_word_embeddings false, the model true (the llama-124m and llama3-1b presets tie the head to the embedding, llama and llama-tiny do not)`},
		{"positions", nil, set("max_position_embeddings", 4),
			`config.json has max_position_embeddings 4, fewer than the model's context of 8 (--context 4 or less)`},
		{"vocabulary", nil, set("vocab_size", 32000),
			`config.json has vocab_size 32000, more than the model's vocabulary of 256 (--vocab 32000 or more)`},
		{"model_type", nil, func(c map[string]any) { c["model_type"] = "mistral"; delete(c, "architectures") },
			`config.json has model_type "mistral", want "llama"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := rewriteHF(t, dir, c.tensors, c.config)
			_, err := ReadInitWeights(d, m)
			require.Error(t, err)
			where := d
			if c.tensors != nil {
				where = file(d)
			}
			assert.Equal(t, where+": "+c.want, err.Error())
			assert.NotContains(t, err.Error(), "\n")
		})
	}

	gpt, err := models.NewGPT("gpt", smallGPT)
	require.NoError(t, err)
	_, err = ReadInitWeights(dir, gpt)
	assert.EqualError(t, err, dir+": Hugging Face Llama weights load into Llama models only, and model gpt is a GPT: pick a Llama model with --model (and its sizes as config.json gives them)")
	other, err := models.NewLlama("llama", models.LlamaTiny)
	require.NoError(t, err)
	_, err = ReadInitWeights(dir, other)
	assert.EqualError(t, err, dir+": config.json has num_hidden_layers 2, the model 4 (--layers 2)")
}

// Export picks the layout from the checkpoint's model; a Llama does not
// export as GPT-2, and a vocabulary larger than the model's is one line.
func TestHFLlamaExportErrors(t *testing.T) {
	_, _, w := testLlama(t, smallLlama)
	_, err := ExportHFGPT2(w, t.TempDir(), HFExportOptions{})
	assert.EqualError(t, err, w.Path+` holds model "llama", which is not a GPT (no tensor wte): only GPT checkpoints export to the Hugging Face GPT-2 layout`)
	_, err = ExportHF(w, t.TempDir(), HFExportOptions{Vocab: 300})
	assert.EqualError(t, err, "vocabulary 300: the model has 256 rows in model.embed_tokens.weight")

	_, _, wg := testGPT(t, "gpt", smallGPT)
	got, err := ExportHF(wg, t.TempDir(), HFExportOptions{})
	require.NoError(t, err)
	assert.Equal(t, "GPT2LMHeadModel", got.Class)
}
