package ddp

import (
	"errors"
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
// (Options.InitFrom). path is either
//
//   - a Hugging Face GPT2LMHeadModel directory: config.json and
//     model.safetensors (or its config.json, or a safetensors file other
//     than a ckpt-* one with a config.json beside it), for a GPT. Its sizes
//     must be the model's (n_layer, n_head, n_embd), its n_positions at
//     least the model's context (wpe's first rows are used) and its
//     vocab_size at most the model's vocabulary (wte's rows above it are
//     zero: GPT-2's 50257 tokens fill 50257 of the gpt2 presets' 50304);
//     the tensors may be F32, BF16 or F16, named with or without the
//     "transformer." prefix; the blocks' Conv1D matrices are transposed;
//     the attention mask buffers are skipped and lm_head.weight, when the
//     file has it, must equal wte (the head is tied);
//   - a symddp checkpoint file, or a directory's newest intact one
//     (ReadWeights): its parameters under their own names and shapes, and
//     the sizes it records (heads) equal to the model's; the model's name
//     may differ.
//
// It returns an arena laid out as the trainer lays out m's parameters
// (models.Layout of m.Params()). An error is one line that names the file
// and the tensor or the config.json field at fault.
func ReadInitWeights(path string, m models.Model) ([]float32, error) {
	var desc map[string]int
	if d, ok := m.(ModelDescriber); ok {
		desc = d.Describe()
	}
	if dir, file, ok := hfSource(path); ok {
		return readHFGPT2(dir, file, m.Name(), m.Params(), desc)
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

// readHFGPT2 reads a GPT2LMHeadModel's config.json in dir and its tensors
// in file into an arena for specs, the parameters of model, a GPT of the
// sizes desc gives.
func readHFGPT2(dir, file, model string, specs []models.ParamSpec, desc map[string]int) ([]float32, error) {
	g, err := gptLayout(desc, specs)
	if err != nil {
		return nil, fmt.Errorf("%s: Hugging Face GPT-2 weights load into GPT models only, and model %s is not one: %v", dir, model, err)
	}
	cfgPath := filepath.Join(dir, hfConfigFile)
	cb, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, err
	}
	c, err := parseHFConfig(cb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	if err := c.checkAgainst(g); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: no %s beside config.json (sharded files and pytorch_model.bin are not read: save the model as one safetensors file)", dir, filepath.Base(file))
	}
	if err != nil {
		return nil, err
	}
	f, err := parseSafetensors(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	arena, err := hfArena(f, c, g, specs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return arena, nil
}

// hfArena decodes the tensors of a GPT2LMHeadModel file of config c into
// an arena for specs, the parameters of a GPT of g.
func hfArena(f *stFile, c hfConfig, g models.GPTConfig, specs []models.ParamSpec) ([]float32, error) {
	prefix := ""
	if _, ok := f.Entries[hfPrefix+"wte.weight"]; ok {
		prefix = hfPrefix
	}
	offsets, n := models.Layout(specs)
	arena := make([]float32, n)
	used := map[string]bool{}
	var wte []float32 // as the file has it, for lm_head
	for i, s := range specs {
		hn, transposed := hfName(s.Name, s.Shape)
		name := prefix + hn
		want := s.Shape
		switch {
		case s.Name == "wte":
			want = []int{c.VocabSize, g.Width}
		case s.Name == "wpe":
			want = []int{c.NPositions, g.Width}
		case transposed:
			want = []int{s.Shape[1], s.Shape[0]}
		}
		vals, err := hfTensor(f, name, want)
		if err != nil {
			return nil, err
		}
		used[name] = true
		dst := arena[offsets[i] : offsets[i]+s.Size()]
		switch {
		case s.Name == "wte":
			copy(dst, vals) // the rows above vocab_size stay zero
			wte = vals
		case s.Name == "wpe":
			copy(dst, vals[:len(dst)]) // the first Context positions
		case transposed:
			transpose(dst, vals, want[0], want[1])
		default:
			copy(dst, vals)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Entries)) {
		switch {
		case used[name] || strings.HasPrefix(name, prefix) && hfIgnored(strings.TrimPrefix(name, prefix)):
		case name == "lm_head.weight":
			head, err := hfTensor(f, name, []int{c.VocabSize, g.Width})
			if err != nil {
				return nil, err
			}
			if !slices.Equal(head, wte) {
				return nil, fmt.Errorf("tensor %q differs from %q: symddp's GPT ties its head to wte", name, prefix+"wte.weight")
			}
		default:
			return nil, fmt.Errorf("tensor %q is not a parameter of a GPT-2 of %d layers", name, g.Layers)
		}
	}
	return arena, nil
}

// hfTensor decodes tensor name, which must have shape want and finite
// values.
func hfTensor(f *stFile, name string, want []int) ([]float32, error) {
	e, ok := f.Entries[name]
	if !ok {
		return nil, fmt.Errorf("tensor %q is missing", name)
	}
	if !slices.Equal(e.Shape, want) {
		return nil, fmt.Errorf("tensor %q has shape %v, want %v", name, e.Shape, want)
	}
	vals := make([]float32, shapeSize(want))
	if err := f.floats(name, vals); err != nil {
		return nil, err
	}
	if !hostloops.AllFinite(vals) {
		return nil, fmt.Errorf("tensor %q holds NaN or Inf", name)
	}
	return vals, nil
}

// readCheckpointWeights reads the parameters of a symddp checkpoint
// (weights only) into an arena for specs, checking the sizes the
// checkpoint records against desc, the model's.
func readCheckpointWeights(path string, specs []models.ParamSpec, desc map[string]int) ([]float32, error) {
	w, err := ReadWeights(path)
	if err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(desc)) {
		if was, ok := w.Config[k]; ok && was != desc[k] {
			return nil, fmt.Errorf("%s: the checkpoint's model has %s %d, this model %d (--%s %d)", w.Path, k, was, desc[k], k, was)
		}
	}
	offsets, n := models.Layout(specs)
	arena := make([]float32, n)
	for i, s := range specs {
		shape := w.Shape(s.Name)
		switch {
		case shape == nil:
			return nil, fmt.Errorf("%s: tensor %q is missing", w.Path, s.Name)
		case !slices.Equal(shape, s.Shape):
			return nil, fmt.Errorf("%s: tensor %q has shape %v, the model's is %v", w.Path, s.Name, shape, s.Shape)
		}
		if err := w.f.floats(s.Name, arena[offsets[i]:offsets[i]+s.Size()]); err != nil {
			return nil, fmt.Errorf("%s: %w", w.Path, err)
		}
	}
	if !hostloops.AllFinite(arena) {
		return nil, fmt.Errorf("%s: the parameters hold NaN or Inf", w.Path)
	}
	return arena, nil
}
