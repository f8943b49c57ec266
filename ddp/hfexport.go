package ddp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/symddp/symddp/internal/tempfile"
	"github.com/symddp/symddp/models"
)

// HFExportOptions configures ExportHF and ExportHFGPT2.
type HFExportOptions struct {
	// DType is the type of the tensors written: "F32" (the default for "")
	// or "BF16" (rounded to nearest even).
	DType string
	// Vocab is the number of vocabulary rows written (the embedding's, and
	// an untied head's), config.json's vocab_size: 0 means GPT-2's 50257
	// (models.GPT2Tokens) for a model with the gpt2 presets' padded 50304
	// rows, whose rows above 50257 no token uses, and every row otherwise.
	Vocab int
	// Overwrite replaces the model.safetensors and config.json of a
	// directory that has them; without it that is an error.
	Overwrite bool
}

// HFExport says what ExportHF wrote.
type HFExport struct {
	// Dir holds model.safetensors and config.json.
	Dir string
	// Class is the transformers class of the layout written
	// (GPT2LMHeadModel, LlamaForCausalLM).
	Class string
	// Model is the checkpoint's model, Config the sizes it records (the
	// model's Describe map: layers, heads, width, context, vocab, and a
	// Llama's kv_heads, ffn_hidden, rope_theta, tied_embeddings).
	Model  string
	Config map[string]int
	// Vocab is the vocabulary rows written (config.json's vocab_size),
	// DType the tensors' type.
	Vocab int
	DType string
	// Tensors and Bytes count model.safetensors' tensors and its size.
	Tensors int
	Bytes   int64
}

// CheckExportDir checks, before any work, that ExportHF can write
// into dir: it is a directory, or is created now (with its parents), a
// file can be made in it, and it holds no model.safetensors or
// config.json unless overwrite.
func CheckExportDir(dir string, overwrite bool) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR): // not there, or under a file
		if err := os.MkdirAll(dir, 0o755); err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("%s: cannot create it: %w", dir, err)
		}
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s is a file, not a directory", dir)
	}
	probe, err := tempfile.Create(dir, ".export-probe-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s: cannot write in it: %w", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	if overwrite {
		return nil
	}
	for _, name := range []string{hfModelFile, hfConfigFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return &ExportExistsError{Dir: dir, File: name}
		}
	}
	return nil
}

// ExportExistsError is CheckExportDir's (and ExportHF's) error for a
// directory that holds an export already, without
// HFExportOptions.Overwrite; a command names its own flag for that.
type ExportExistsError struct {
	Dir, File string // the directory, and the file of an export it holds
}

func (e *ExportExistsError) Error() string {
	return fmt.Sprintf("%s already holds %s (overwrite it, or write to another directory)", e.Dir, e.File)
}

// ExportHF writes checkpoint w into dir in the Hugging Face layout of its
// model: LlamaForCausalLM for a Llama (hfllama.go), GPT2LMHeadModel for a
// GPT (ExportHFGPT2). A checkpoint of another model is an error naming
// it and the layouts there are.
func ExportHF(w *Weights, dir string, o HFExportOptions) (HFExport, error) {
	return ExportHFContext(context.Background(), w, dir, o)
}

// ExportHFContext is ExportHF, stopped when ctx is done (a signal to the
// export command): it returns ctx's error then, having removed what it had
// written, so that dir holds what it held before (nothing, or the previous
// export).
func ExportHFContext(ctx context.Context, w *Weights, dir string, o HFExportOptions) (HFExport, error) {
	for _, a := range hfArchs {
		if _, err := a.params(w.Config); err == nil {
			return a.export(ctx, w, dir, o)
		}
	}
	why := "its sizes are neither a GPT's nor a Llama's"
	if w.Config == nil {
		why = "it records no sizes"
	}
	return HFExport{}, fmt.Errorf("%s holds model %q, which has no Hugging Face layout (%s): export writes the checkpoints of the gpt models (GPT2LMHeadModel) and of the llama models (LlamaForCausalLM)", w.Path, w.Model, why)
}

// ExportHFGPT2 writes the GPT of checkpoint w into dir in Hugging Face's
// GPT2LMHeadModel layout (hfgpt2.go): model.safetensors, the parameters
// named "transformer.<GPT-2 name>", the blocks' matrices transposed to
// Conv1D's (in,out), wte cut to o.Vocab rows, no lm_head.weight (tied to
// wte, as transformers saves it), metadata {"format": "pt"}; then
// config.json, GPT2Config's fields for the model's sizes (no dropout:
// symddp trains without it). Both files are written to temporary files
// and then renamed into place, config.json last, so that a failure leaves
// dir as it was. A checkpoint of another model is an error naming it.
func ExportHFGPT2(w *Weights, dir string, o HFExportOptions) (HFExport, error) {
	return hfGPT2.export(context.Background(), w, dir, o)
}

// export writes checkpoint w, a model of a's kind, into dir: every
// parameter under its file name and shape (vocabulary rows cut to
// o.Vocab), metadata {"format": "pt"}, then config.json.
func (a *hfArch) export(ctx context.Context, w *Weights, dir string, o HFExportOptions) (HFExport, error) {
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
	// the temporary files of an export killed before it could remove them
	// (SIGKILL, a second signal): each as large as the model, hidden
	removeTemps(dir, "."+hfModelFile+"-*.tmp", "."+hfConfigFile+"-*.tmp")
	specs, err := a.checkpointParams(w)
	if err != nil {
		return HFExport{}, err
	}
	vocab, rows := o.Vocab, w.Config["vocab"]
	switch {
	case vocab == 0 && rows == models.GPT2.Vocab:
		vocab = models.GPT2Tokens
	case vocab == 0:
		vocab = rows
	case vocab < 0 || vocab > rows:
		return HFExport{}, fmt.Errorf("vocabulary %d: the model has %d rows in %s", vocab, rows, a.embed)
	}
	tensors := make([]stTensor, 0, len(specs))
	for _, s := range specs {
		vals := make([]float32, s.Size())
		if err := w.Read(s.Name, vals); err != nil {
			return HFExport{}, err
		}
		m := a.tensor(s)
		t := stTensor{Name: a.prefix + m.name, Shape: m.fileShape(s.Shape, vocab, s.Shape[0]), Data: vals, DType: dtype}
		switch {
		case m.rows == rowsVocab:
			t.Data = vals[:vocab*s.Shape[1]]
		case m.transposed:
			t.Data = make([]float32, len(vals))
			transpose(t.Data, vals, s.Shape[0], s.Shape[1])
		}
		tensors = append(tensors, t)
	}
	js, err := json.MarshalIndent(a.exportConfig(w.Config, vocab, dtype), "", "  ")
	if err != nil {
		return HFExport{}, err
	}
	// Both files are complete on disk before either is renamed into
	// place: a failure or a stop leaves dir's previous export (or none),
	// not a new model.safetensors beside an old config.json.
	model, err := writeTemp(ctx, dir, hfModelFile, func(bw *bufio.Writer) error {
		return writeSafetensors(bw, map[string]string{"format": "pt"}, tensors)
	})
	defer os.Remove(model) // a no-op once renamed
	if err != nil {
		return HFExport{}, err
	}
	config, err := writeTemp(ctx, dir, hfConfigFile, func(bw *bufio.Writer) error {
		_, err := bw.Write(append(js, '\n'))
		return err
	})
	defer os.Remove(config)
	if err != nil {
		return HFExport{}, err
	}
	if err := ctx.Err(); err != nil {
		return HFExport{}, err
	}
	if err := os.Rename(model, filepath.Join(dir, hfModelFile)); err != nil {
		return HFExport{}, err
	}
	if err := os.Rename(config, filepath.Join(dir, hfConfigFile)); err != nil {
		return HFExport{}, err
	}
	fi, err := os.Stat(filepath.Join(dir, hfModelFile))
	if err != nil {
		return HFExport{}, err
	}
	if err := syncDir(dir); err != nil {
		return HFExport{}, err
	}
	return HFExport{Dir: dir, Class: a.class, Model: w.Model, Config: w.Config, Vocab: vocab, DType: dtype,
		Tensors: len(tensors), Bytes: fi.Size()}, nil
}

// checkpointParams checks that w holds a model of a's kind (the sizes it
// records, every parameter of such a model with its shape) and returns
// the parameters.
func (a *hfArch) checkpointParams(w *Weights) ([]models.ParamSpec, error) {
	notKind := func(why string, args ...any) error {
		return fmt.Errorf("%s holds model %q, which is not a %s (%s): only %s checkpoints export to the Hugging Face %s layout",
			w.Path, w.Model, a.kind, fmt.Sprintf(why, args...), a.kind, a.name)
	}
	if w.Config == nil {
		return nil, notKind("it records no sizes")
	}
	specs, err := a.params(w.Config)
	if err != nil {
		return nil, notKind("%v", err)
	}
	var tm *TensorMismatch
	if err := w.Holds(specs); errors.As(err, &tm) {
		if tm.Have == nil {
			return nil, notKind("no tensor %s", tm.Name)
		}
		return nil, notKind("tensor %s has shape %v, a %s's %v", tm.Name, tm.Have, a.kind, tm.Want)
	}
	return specs, nil
}

// writeTemp writes dir/name's content through write into a temporary
// file in dir (of os.Create's mode, 0666 less the umask), syncs it and
// returns its path, for the caller to rename into place or remove (also
// after an error, when the path is not ""). The writes stop with ctx's
// error once ctx is done.
func writeTemp(ctx context.Context, dir, name string, write func(*bufio.Writer) error) (string, error) {
	f, err := tempfile.Create(dir, "."+name+"-*.tmp")
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(ctxWriter{ctx, f}, 1<<20)
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
		return f.Name(), fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	return f.Name(), nil
}

// ctxWriter writes to w until ctx is done, then fails with ctx's error.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
