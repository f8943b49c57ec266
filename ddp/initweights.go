package ddp

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/symddp/symddp/internal/hostloops"
	"github.com/symddp/symddp/models"
)

// ReadInitWeights reads m's parameters from path, for a run that starts
// from trained weights with fresh optimizer state, step and data
// (Options.InitFrom). path is one of
//
//   - a Hugging Face GPT2LMHeadModel directory, for a GPT (hfgpt2.go). Its
//     sizes must be the model's (n_layer, n_head, n_embd), its n_positions
//     at least the model's context (wpe's first rows are used) and its
//     vocab_size at most the model's vocabulary (wte's rows above it are
//     zero: GPT-2's 50257 tokens fill 50257 of the gpt2 presets' 50304);
//     the tensors are named with or without the "transformer." prefix; the
//     blocks' Conv1D matrices are transposed; the attention mask buffers
//     are skipped and lm_head.weight, when the file has it, must equal wte
//     (the head is tied);
//   - a Hugging Face LlamaForCausalLM directory, for a Llama (hfllama.go).
//     Its sizes must be the model's (num_hidden_layers,
//     num_attention_heads, num_key_value_heads, hidden_size,
//     intermediate_size, rope_theta, tie_word_embeddings), its
//     max_position_embeddings at least the model's context and its
//     vocab_size at most the model's vocabulary (the embedding's and an
//     untied head's rows above it are zero, as GPT-2's wte's); what the
//     model cannot compute is refused (rope_scaling other than null,
//     rms_norm_eps other than the model's 1e-5, biases, another hidden_act
//     or head_dim); the tensors keep their names and shapes; the
//     rotary_emb.inv_freq buffers are skipped, and an lm_head.weight in the
//     file of a tied model must equal the embedding;
//   - a symddp checkpoint file, or a directory's newest intact one
//     (ReadWeights): its parameters under their own names and shapes, and
//     the sizes it records (heads) equal to the model's; the model's name
//     may differ.
//
// A Hugging Face directory holds config.json and model.safetensors (path
// may also name its config.json, or a safetensors file other than a
// ckpt-* one with a config.json beside it); config.json's model_type (or
// architectures) says which of the two it is, and its tensors may be F32,
// BF16 or F16.
//
// It returns an arena laid out as the trainer lays out m's parameters
// (models.Layout of m.Params()). An error is one line that names the file
// and the tensor or the config.json field at fault.
func ReadInitWeights(path string, m models.Model) ([]float32, error) {
	r, err := readInitWeights(path, m)
	return r.arena, err
}

// initRead is what readInitWeights read.
type initRead struct {
	arena []float32
	// source names the file read: "hf/model.safetensors (Hugging Face)",
	// "ck/ckpt-000000090.safetensors (step 90 of llama-tiny)"
	source string
	// warning is that of a checkpoint directory whose newest checkpoints
	// are damaged (Weights.Warning; "" when none)
	warning string
}

// readInitWeights is ReadInitWeights, saying which file it read and why
// not a newer one.
func readInitWeights(path string, m models.Model) (initRead, error) {
	var desc map[string]int
	if d, ok := m.(ModelDescriber); ok {
		desc = d.Describe()
	}
	if dir, file, ok := hfSource(path); ok {
		arena, err := readHF(dir, file, m.Name(), m.Params(), desc)
		return initRead{arena: arena, source: file + " (Hugging Face)"}, err
	}
	return readCheckpointWeights(path, m.Params(), desc)
}

// hfSource says whether path is a Hugging Face directory, or a safetensors
// file in one, and returns the directory and the weights file.
func hfSource(path string) (dir, file string, ok bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", false
	}
	dir, file = path, filepath.Join(path, hfModelFile)
	if !fi.IsDir() {
		dir, file = filepath.Dir(path), path
		switch base := filepath.Base(path); {
		case strings.HasPrefix(base, ckptPrefix):
			return "", "", false
		case base == hfConfigFile:
			file = filepath.Join(dir, hfModelFile)
		}
	}
	_, err = os.Stat(filepath.Join(dir, hfConfigFile))
	return dir, file, err == nil
}

// readCheckpointWeights reads the parameters of a symddp checkpoint
// (weights only) into an arena for specs, checking the sizes the
// checkpoint records against desc, the model's; and the warning of a
// directory whose newest checkpoints are damaged.
func readCheckpointWeights(path string, specs []models.ParamSpec, desc map[string]int) (initRead, error) {
	w, err := ReadWeights(path)
	if err != nil {
		return initRead{}, err
	}
	for _, k := range slices.Sorted(maps.Keys(desc)) {
		if was, ok := w.Config[k]; ok && was != desc[k] {
			return initRead{}, fmt.Errorf("%s: the checkpoint's model has %s %d, this model %d (%s)", w.Path, k, was, desc[k], sizeHint(k, was))
		}
	}
	if err := w.Holds(specs); err != nil {
		return initRead{}, fmt.Errorf("%s: %w", w.Path, err)
	}
	offsets, n := models.Layout(specs)
	arena := make([]float32, n)
	for i, s := range specs {
		if err := w.f.floats(s.Name, arena[offsets[i]:offsets[i]+s.Size()]); err != nil {
			return initRead{}, fmt.Errorf("%s: %w", w.Path, err)
		}
	}
	if !hostloops.AllFinite(arena) {
		return initRead{}, fmt.Errorf("%s: the parameters hold NaN or Inf", w.Path)
	}
	return initRead{arena: arena, source: fmt.Sprintf("%s (step %d of %s)", w.Path, w.Step, w.Model), warning: w.Warning()}, nil
}
