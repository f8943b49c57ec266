package ddp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/symddp/symddp/models"
)

// HFExportOptions configures ExportHFGPT2.
type HFExportOptions struct {
	// DType is the type of the tensors written: "F32" (the default for "")
	// or "BF16" (rounded to nearest even).
	DType string
	// Vocab is the number of wte rows written, config.json's vocab_size:
	// 0 means GPT-2's 50257 (models.GPT2Tokens) for a model with the gpt2
	// presets' padded 50304 rows, whose rows above 50257 no token uses,
	// and every row otherwise.
	Vocab int
	// Overwrite replaces the model.safetensors and config.json of a
	// directory that has them; without it that is an error.
	Overwrite bool
}

// HFExport says what ExportHFGPT2 wrote.
type HFExport struct {
	// Dir holds model.safetensors and config.json.
	Dir string
	// Model is the checkpoint's model, Config its sizes.
	Model  string
	Config models.GPTConfig
	// Vocab is the rows of wte written (config.json's vocab_size), DType
	// the tensors' type.
	Vocab int
	DType string
	// Tensors and Bytes count model.safetensors' tensors and its size.
	Tensors int
	Bytes   int64
}

// CheckExportDir checks, before any work, that ExportHFGPT2 can write
// into dir: it is a directory or does not exist yet, and it holds no
// model.safetensors or config.json unless overwrite.
func CheckExportDir(dir string, overwrite bool) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is a file, not a directory", dir)
	}
	if overwrite {
		return nil
	}
	for _, name := range []string{hfModelFile, hfConfigFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s already holds %s (overwrite it, or write to another directory)", dir, name)
		}
	}
	return nil
}

// ExportHFGPT2 writes the GPT of checkpoint w into dir in Hugging Face's
// GPT2LMHeadModel layout (hfgpt2.go): model.safetensors, the parameters
// named "transformer.<GPT-2 name>", the blocks' matrices transposed to
// Conv1D's (in,out), wte cut to o.Vocab rows, no lm_head.weight (tied to
// wte, as transformers saves it), metadata {"format": "pt"}; then
// config.json, GPT2Config's fields for the model's sizes (no dropout:
// symddp trains without it). Each file is written to a temporary file
// and renamed into place, config.json last. A checkpoint of another model
// is an error naming it.
func ExportHFGPT2(w *Weights, dir string, o HFExportOptions) (HFExport, error) {
	dtype := o.DType
	if dtype == "" {
		dtype = "F32"
	}
	if dtype != "F32" && dtype != "BF16" {
		return HFExport{}, fmt.Errorf("dtype %q: want F32 or BF16", o.DType)
	}
	if err := CheckExportDir(dir, o.Overwrite); err != nil {
		return HFExport{}, err
	}
	g, specs, err := checkpointGPT(w)
	if err != nil {
		return HFExport{}, err
	}
	vocab := o.Vocab
	switch {
	case vocab == 0 && g.Vocab == models.GPT2.Vocab:
		vocab = models.GPT2Tokens
	case vocab == 0:
		vocab = g.Vocab
	case vocab < 0 || vocab > g.Vocab:
		return HFExport{}, fmt.Errorf("vocabulary %d: the model has %d rows in wte", vocab, g.Vocab)
	}
	tensors := make([]stTensor, 0, len(specs))
	for _, s := range specs {
		vals := make([]float32, s.Size())
		if err := w.Read(s.Name, vals); err != nil {
			return HFExport{}, err
		}
		hn, transposed := hfName(s.Name, s.Shape)
		t := stTensor{Name: hfPrefix + hn, Shape: s.Shape, Data: vals, DType: dtype}
		switch {
		case s.Name == "wte":
			t.Shape, t.Data = []int{vocab, g.Width}, vals[:vocab*g.Width]
		case transposed:
			t.Shape, t.Data = []int{s.Shape[1], s.Shape[0]}, make([]float32, len(vals))
			transpose(t.Data, vals, s.Shape[0], s.Shape[1])
		}
		tensors = append(tensors, t)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return HFExport{}, err
	}
	if err := writeFileAtomic(dir, hfModelFile, func(bw *bufio.Writer) error {
		return writeSafetensors(bw, map[string]string{"format": "pt"}, tensors)
	}); err != nil {
		return HFExport{}, err
	}
	js, err := json.MarshalIndent(exportConfig(g, vocab, dtype), "", "  ")
	if err != nil {
		return HFExport{}, err
	}
	if err := writeFileAtomic(dir, hfConfigFile, func(bw *bufio.Writer) error {
		_, err := bw.Write(append(js, '\n'))
		return err
	}); err != nil {
		return HFExport{}, err
	}
	fi, err := os.Stat(filepath.Join(dir, hfModelFile))
	if err != nil {
		return HFExport{}, err
	}
	if err := syncDir(dir); err != nil {
		return HFExport{}, err
	}
	return HFExport{Dir: dir, Model: w.Model, Config: g, Vocab: vocab, DType: dtype, Tensors: len(tensors), Bytes: fi.Size()}, nil
}

// checkpointGPT checks that w holds a GPT (the sizes it records, every
// parameter of a GPT of them with its shape) and returns the sizes and the
// parameters.
func checkpointGPT(w *Weights) (models.GPTConfig, []models.ParamSpec, error) {
	notGPT := func(why string, args ...any) error {
		return fmt.Errorf("%s holds model %q, which is not a GPT (%s): only GPT checkpoints export to the Hugging Face GPT-2 layout",
			w.Path, w.Model, fmt.Sprintf(why, args...))
	}
	if w.Config == nil {
		return models.GPTConfig{}, nil, notGPT("it records no sizes")
	}
	g, err := models.GPTConfigOf(w.Config)
	if err != nil {
		return models.GPTConfig{}, nil, notGPT("%v", err)
	}
	ref, err := models.NewGPT(w.Model, g)
	if err != nil {
		return models.GPTConfig{}, nil, notGPT("%v", err)
	}
	specs := ref.Params()
	for _, s := range specs {
		switch shape := w.Shape(s.Name); {
		case shape == nil:
			return models.GPTConfig{}, nil, notGPT("no tensor %s", s.Name)
		case !slices.Equal(shape, s.Shape):
			return models.GPTConfig{}, nil, notGPT("tensor %s has shape %v, a GPT's %v", s.Name, shape, s.Shape)
		}
	}
	return g, specs, nil
}

// exportConfig is config.json for a GPT of g with vocab rows of wte.
func exportConfig(g models.GPTConfig, vocab int, dtype string) hfConfig {
	c := hfDefaults()
	c.Architectures = []string{"GPT2LMHeadModel"}
	c.VocabSize, c.NPositions, c.NCtx = vocab, g.Context, g.Context
	c.NEmbd, c.NLayer, c.NHead = g.Width, g.Layers, g.Heads
	c.ResidPdrop, c.EmbdPdrop, c.AttnPdrop = 0, 0, 0
	if vocab == models.GPT2Tokens {
		eot := models.GPT2Tokens - 1 // <|endoftext|>
		c.BOSTokenID, c.EOSTokenID = &eot, &eot
	}
	c.TorchDType = map[string]string{"F32": "float32", "BF16": "bfloat16"}[dtype]
	return c
}

// writeFileAtomic writes dir/name through write into a temporary file in
// dir, syncs it and renames it into place.
func writeFileAtomic(dir, name string, write func(*bufio.Writer) error) error {
	f, err := os.CreateTemp(dir, "."+name+"-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	bw := bufio.NewWriterSize(f, 1<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}
