package ddp

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/symddp/symddp/models"
)

// Weights are the parameters of a checkpoint, read without a trainer: what
// a program that only runs a trained model (sampling, evaluation, export)
// needs.
type Weights struct {
	// Path is the file read.
	Path string
	// Model is the registry name the checkpoint was trained as; Config what
	// the model said of its sizes (ModelDescriber), nil when nothing.
	Model  string
	Config map[string]int
	// Step is the optimizer step the checkpoint was written after.
	Step int
	// Skipped are the newer checkpoints of the directory read that fail
	// their checks, newest first, each "path: why": a program says that it
	// read an older one (Warning).
	Skipped []string
	f       *stFile
}

// Warning is the line a program prints when ReadWeights read an older
// checkpoint of a directory than its newest, which is damaged; "" when not.
func (w *Weights) Warning() string {
	switch len(w.Skipped) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("%s; read the newest intact checkpoint instead, %s (step %d)", w.Skipped[0], w.Path, w.Step)
	}
	return fmt.Sprintf("%s, and %d more newer checkpoints fail their checks; read the newest intact one instead, %s (step %d)",
		w.Skipped[0], len(w.Skipped)-1, w.Path, w.Step)
}

// latestIntact is the newest intact checkpoint of dir (its path, parsed
// file and metadata: read once) and the newer ones that fail their checks
// ("path: why", newest first), or an error that
// says why there is none: no checkpoint files at all, or why the newest
// one fails its checks (and how many older ones fail too).
func latestIntact(dir string) (string, *stFile, ckptMeta, []string, error) {
	paths, err := listCheckpoints(dir)
	if err != nil {
		return "", nil, ckptMeta{}, nil, fmt.Errorf("checkpoints in %s: %w", dir, err)
	}
	if len(paths) == 0 {
		if _, err := os.Stat(filepath.Join(dir, hfModelFile)); err == nil {
			return "", nil, ckptMeta{}, nil, fmt.Errorf("no checkpoint in %s: it holds %s, a Hugging Face model, not train's %s<step>%s files (train --init-from reads such a directory, with its %s)",
				dir, hfModelFile, ckptPrefix, ckptSuffix, hfConfigFile)
		}
		return "", nil, ckptMeta{}, nil, fmt.Errorf("no checkpoint in %s: train writes %s<step>%s files there with --checkpoint-dir", dir, ckptPrefix, ckptSuffix)
	}
	var skipped []string
	var newest error
	for _, p := range paths {
		f, _, meta, err := openCheckpoint(p)
		if err == nil {
			return p, f, meta, skipped, nil
		}
		skipped = append(skipped, fmt.Sprintf("%s: %v", p, err))
		if newest == nil {
			newest = fmt.Errorf("%s: %w", p, err)
		}
	}
	if len(paths) == 1 {
		return "", nil, ckptMeta{}, nil, fmt.Errorf("no intact checkpoint in %s: %w", dir, newest)
	}
	return "", nil, ckptMeta{}, nil, fmt.Errorf("none of the %d checkpoints in %s is intact; the newest, %w", len(paths), dir, newest)
}

// ReadWeights reads a checkpoint file, or the newest intact checkpoint of a
// checkpoint directory (LatestCheckpoint), and verifies its SHA-256. When
// newer checkpoints of the directory are damaged, Weights.Skipped lists
// them. The data passes through the hash without being kept: the
// Weights read each tensor from the file when asked for it (Read), so
// that the optimizer state a checkpoint also holds never takes memory;
// the file stays open while the Weights are reachable.
func ReadWeights(path string) (*Weights, error) {
	var (
		f       *stFile
		meta    ckptMeta
		skipped []string
		err     error
	)
	if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
		if path, f, meta, skipped, err = latestIntact(path); err != nil {
			return nil, fmt.Errorf("read weights: %w", err)
		}
	} else if f, _, meta, err = openCheckpoint(path); err != nil {
		return nil, fmt.Errorf("read weights %s: %w", path, err)
	}
	return &Weights{Path: path, Model: meta.Model, Config: meta.ModelConfig, Step: meta.Step, Skipped: skipped, f: f}, nil
}

// Shape is the shape of tensor name, nil when the checkpoint has none.
func (w *Weights) Shape(name string) []int {
	e, ok := w.f.Entries[name]
	if !ok {
		return nil
	}
	return e.Shape
}

// Holds checks that the checkpoint has a tensor of each of specs, of its
// shape: a model built from the sizes its metadata records must find
// exactly its parameters (metadata edited or written by another tool may
// say otherwise, and building such a model could ask for any memory). The
// error is a *TensorMismatch.
func (w *Weights) Holds(specs []models.ParamSpec) error {
	for _, s := range specs {
		if shape := w.Shape(s.Name); !slices.Equal(shape, s.Shape) {
			return &TensorMismatch{Name: s.Name, Model: w.Model, Have: shape, Want: s.Shape}
		}
	}
	return nil
}

// TensorMismatch is a parameter a checkpoint lacks (Have nil) or holds at
// another shape than the model's.
type TensorMismatch struct {
	Name       string
	Model      string // the checkpoint's model
	Have, Want []int
}

func (e *TensorMismatch) Error() string {
	if e.Have == nil {
		return fmt.Sprintf("tensor %q is missing (the checkpoint holds model %q)", e.Name, e.Model)
	}
	return fmt.Sprintf("tensor %q has shape %v, the model's is %v", e.Name, e.Have, e.Want)
}

// Read copies tensor name into dst (as many values as the tensor has).
func (w *Weights) Read(name string, dst []float32) error {
	if err := w.f.float32s(name, dst); err != nil {
		return fmt.Errorf("weights %s: %w", w.Path, err)
	}
	return nil
}
