package ddp

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/symddp/symddp/internal/hostloops"
	"github.com/symddp/symddp/internal/regfile"
	"github.com/symddp/symddp/models"
)

// Hugging Face checkpoints in and out (Options.InitFrom, the export
// command): a directory with config.json and model.safetensors. One
// reader, checker and writer serves every architecture; what differs is an
// hfArch, a small table per architecture: hfGPT2 (GPT2LMHeadModel,
// hfgpt2.go) and hfLlama (LlamaForCausalLM, hfllama.go).

const (
	hfConfigFile = "config.json"
	hfModelFile  = "model.safetensors"
)

// hfRows says how many rows of a parameter a file holds.
type hfRows int

const (
	// rowsOwn: the parameter's own shape.
	rowsOwn hfRows = iota
	// rowsVocab: config.json's vocab_size rows, at most the model's
	// vocabulary; the model's rows above them are zero (padding).
	rowsVocab
	// rowsPositions: config.json's positions, at least the model's
	// context; the model takes the first ones.
	rowsPositions
)

// hfTensorMap says where one parameter lives in a file.
type hfTensorMap struct {
	name       string // the file's name, without the architecture's prefix
	transposed bool   // the file holds the matrix (in,out)
	rows       hfRows
}

// fileShape is the shape of a parameter of shape in a file whose
// vocabulary and position rows are vocab and positions.
func (m hfTensorMap) fileShape(shape []int, vocab, positions int) []int {
	switch {
	case m.rows == rowsVocab:
		return []int{vocab, shape[1]}
	case m.rows == rowsPositions:
		return []int{positions, shape[1]}
	case m.transposed:
		return []int{shape[1], shape[0]}
	}
	return shape
}

// hfFileConfig is an architecture's config.json, read.
type hfFileConfig interface {
	// check says whether a checkpoint of this config loads into a model of
	// the sizes desc gives (its Describe map), naming the field that does
	// not fit.
	check(desc map[string]int) error
	// rows is the file's vocabulary and positions (rowsVocab and
	// rowsPositions parameters).
	rows() (vocab, positions int)
}

// hfArch describes one Hugging Face architecture to the shared code.
type hfArch struct {
	// name is the architecture in messages ("GPT-2"), kind the symddp
	// models that hold it ("GPT"), class and modelType transformers'
	// class and config.json's model_type.
	name, kind, class, modelType string
	// prefix starts the file's parameter names in files saved from class;
	// files of the bare model (OpenAI's GPT-2) lack it.
	prefix string
	// embed is the embedding's parameter name; tiedHead the file's name of
	// a head that must equal it when the model ties them, and tiedWhy says
	// so in the error.
	embed, tiedHead, tiedWhy string
	// params is the parameters of a model of the sizes desc gives, in
	// arena order, or why desc does not describe one.
	params func(desc map[string]int) ([]models.ParamSpec, error)
	// tensor says where a parameter lives in the file.
	tensor func(s models.ParamSpec) hfTensorMap
	// ignored says whether a tensor of the file (named without the
	// prefix) holds no parameter: buffers older transformers saved.
	ignored func(name string) bool
	// parseConfig reads config.json over the architecture's defaults.
	parseConfig func(b []byte) (hfFileConfig, error)
	// exportConfig is config.json for a model of desc written with vocab
	// rows of its vocabulary in dtype.
	exportConfig func(desc map[string]int, vocab int, dtype string) any
}

// hfParamsOf is an hfArch's params for models that configOf reads from a
// description and newModel builds.
func hfParamsOf[C any, M models.Model](configOf func(map[string]int) (C, error), newModel func(string, C) (M, error)) func(map[string]int) ([]models.ParamSpec, error) {
	return func(desc map[string]int) ([]models.ParamSpec, error) {
		c, err := configOf(desc)
		if err != nil {
			return nil, err
		}
		m, err := newModel("", c)
		if err != nil {
			return nil, err
		}
		return m.Params(), nil
	}
}

// hfArchs are the architectures symddp reads and writes. Llama comes
// first: a Llama's description also reads as a GPT's sizes, a GPT's does
// not make a Llama.
var hfArchs = []*hfArch{&hfLlama, &hfGPT2}

// hfArchOfModel is the architecture of a model of desc: the first whose
// parameters desc describes, GPT-2 when none does (whose errors say what
// is missing).
func hfArchOfModel(desc map[string]int) *hfArch {
	for _, a := range hfArchs {
		if _, err := a.params(desc); err == nil {
			return a
		}
	}
	return &hfGPT2
}

// hfArchOfConfig is the architecture config.json's model_type or
// architectures names, or nil.
func hfArchOfConfig(b []byte) *hfArch {
	var c struct {
		ModelType     string   `json:"model_type"`
		Architectures []string `json:"architectures"`
	}
	if json.Unmarshal(b, &c) != nil {
		return nil
	}
	for _, a := range hfArchs {
		if c.ModelType == a.modelType || slices.Contains(c.Architectures, a.class) {
			return a
		}
	}
	return nil
}

// layout checks that specs are the parameters (names and shapes) of a
// model of a's kind of the sizes desc gives.
func (a *hfArch) layout(desc map[string]int, specs []models.ParamSpec) error {
	if desc == nil {
		return fmt.Errorf("it records no sizes (not a %s)", a.kind)
	}
	want, err := a.params(desc)
	if err != nil {
		return fmt.Errorf("not a %s: %w", a.kind, err)
	}
	if len(specs) != len(want) {
		return fmt.Errorf("%d parameters, a %s of these sizes has %d (not a %s)", len(specs), a.kind, len(want), a.kind)
	}
	for i, s := range specs {
		if s.Name != want[i].Name || !slices.Equal(s.Shape, want[i].Shape) {
			return fmt.Errorf("parameter %d is %s %v, a %s's is %s %v (not a %s)", i, s.Name, s.Shape, a.kind, want[i].Name, want[i].Shape, a.kind)
		}
	}
	return nil
}

// readHF reads the Hugging Face directory dir (config.json, and the
// weights in file) into an arena for specs, the parameters of model, of
// the sizes desc gives. The architecture is the one config.json names, or
// the model's.
func readHF(dir, file, model string, specs []models.ParamSpec, desc map[string]int) ([]float32, error) {
	cfgPath := filepath.Join(dir, hfConfigFile)
	for _, p := range []string{cfgPath, file} {
		if err := regfile.Check(p); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	cb, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, err
	}
	a := hfArchOfConfig(cb)
	if a == nil {
		a = hfArchOfModel(desc)
	}
	if err := a.layout(desc, specs); err != nil {
		if other := hfArchOfModel(desc); other != a && other.layout(desc, specs) == nil {
			return nil, fmt.Errorf("%s: Hugging Face %s weights load into %s models only, and model %s is a %s: pick a %s model with --model (and its sizes as config.json gives them)",
				dir, a.name, a.kind, model, other.kind, a.kind)
		}
		return nil, fmt.Errorf("%s: Hugging Face %s weights load into %s models only, and model %s is not one: %v", dir, a.name, a.kind, model, err)
	}
	c, err := a.parseConfig(cb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	if err := c.check(desc); err != nil {
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
	arena, err := a.arena(f, c, desc["layers"], specs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return arena, nil
}

// arena decodes the tensors of a file of config c into an arena for specs,
// the parameters of a model of a's kind with the given layers: every
// parameter present with its file shape, and every other tensor an ignored
// buffer or a head equal to the embedding.
func (a *hfArch) arena(f *stFile, c hfFileConfig, layers int, specs []models.ParamSpec) ([]float32, error) {
	prefix := ""
	if _, ok := f.Entries[a.prefix+a.tensor(specs[0]).name]; ok {
		prefix = a.prefix
	}
	vocab, positions := c.rows()
	offsets, n := models.Layout(specs)
	arena := make([]float32, n)
	used := map[string]bool{}
	var embed []float32 // as the file has it, for a tied head
	var embedName string
	var embedShape []int
	for i, s := range specs {
		m := a.tensor(s)
		name := prefix + m.name
		want := m.fileShape(s.Shape, vocab, positions)
		vals, err := hfTensor(f, name, want)
		if err != nil {
			return nil, err
		}
		used[name] = true
		dst := arena[offsets[i] : offsets[i]+s.Size()]
		if m.transposed {
			transpose(dst, vals, want[0], want[1])
		} else {
			copy(dst, vals) // vocabulary rows: those above vocab_size stay zero; positions: the first ones
		}
		if s.Name == a.embed {
			embed, embedName, embedShape = vals, name, want
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Entries)) {
		switch {
		case used[name] || strings.HasPrefix(name, prefix) && a.ignored(strings.TrimPrefix(name, prefix)):
		case name == a.tiedHead:
			head, err := hfTensor(f, name, embedShape)
			if err != nil {
				return nil, err
			}
			if !slices.Equal(head, embed) {
				return nil, fmt.Errorf("tensor %q differs from %q: %s", name, embedName, a.tiedWhy)
			}
		default:
			return nil, fmt.Errorf("tensor %q is not a parameter of a %s of %d layers", name, a.name, layers)
		}
	}
	return arena, nil
}

// errConfigSize is config.json's field, of value file, differing from
// the model's size model, which flag sets.
func errConfigSize(field string, file, model int, flag string) error {
	return fmt.Errorf("config.json has %s %d, the model %d (%s %d)", field, file, model, flag, file)
}

// checkConfigRows checks config.json's positions (posField) and
// vocab_size against a model of the given context and vocabulary: at
// least its positions, at most its vocabulary.
func checkConfigRows(posField string, positions, context, vocab, modelVocab int) error {
	switch {
	case positions < context:
		return fmt.Errorf("config.json has %s %d, fewer than the model's context of %d (--context %d or less)", posField, positions, context, positions)
	case vocab > modelVocab:
		return fmt.Errorf("config.json has vocab_size %d, more than the model's vocabulary of %d (--vocab %d or more)", vocab, modelVocab, vocab)
	case vocab < 1 || positions < 1:
		return fmt.Errorf("config.json has vocab_size %d and %s %d", vocab, posField, positions)
	}
	return nil
}

// hfTorchDTypes is config.json's torch_dtype for the dtype of the tensors
// written.
var hfTorchDTypes = map[string]string{"F32": "float32", "BF16": "bfloat16"}

// hfEndOfText is GPT-2's <|endoftext|> id, its bos and eos token, for a
// file of GPT-2's vocabulary; nil for another vocabulary, whose special
// tokens symddp does not know.
func hfEndOfText(vocab int) *int {
	if vocab != models.GPT2Tokens {
		return nil
	}
	eot := models.GPT2Tokens - 1
	return &eot
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

// transpose writes src (rows,cols) into dst as (cols,rows).
func transpose(dst, src []float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		for c, v := range src[r*cols : (r+1)*cols] {
			dst[c*rows+r] = v
		}
	}
}
