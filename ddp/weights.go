package ddp

import (
	"fmt"
	"os"
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
	f    *stFile
}

// latestIntact is the newest intact checkpoint of dir, or an error that
// says why there is none: no checkpoint files at all, or why the newest
// one fails its checks (and how many older ones fail too).
func latestIntact(dir string) (string, error) {
	paths, err := listCheckpoints(dir)
	if err != nil {
		return "", fmt.Errorf("checkpoints in %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("no checkpoint in %s: train writes %s<step>%s files there with --checkpoint-dir", dir, ckptPrefix, ckptSuffix)
	}
	var newest error
	for _, p := range paths {
		_, err := verifyCheckpoint(p)
		if err == nil {
			return p, nil
		}
		if newest == nil {
			newest = fmt.Errorf("%s: %w", p, err)
		}
	}
	if len(paths) == 1 {
		return "", fmt.Errorf("no intact checkpoint in %s: %w", dir, newest)
	}
	return "", fmt.Errorf("none of the %d checkpoints in %s is intact; the newest, %w", len(paths), dir, newest)
}

// ReadWeights reads a checkpoint file, or the newest intact checkpoint of a
// checkpoint directory (LatestCheckpoint), and verifies its SHA-256.
func ReadWeights(path string) (*Weights, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		latest, err := latestIntact(path)
		if err != nil {
			return nil, fmt.Errorf("read weights: %w", err)
		}
		path = latest
	}
	f, meta, err := readCheckpointFile(path)
	if err != nil {
		return nil, fmt.Errorf("read weights %s: %w", path, err)
	}
	return &Weights{Path: path, Model: meta.Model, Config: meta.ModelConfig, Step: meta.Step, f: f}, nil
}

// Shape is the shape of tensor name, nil when the checkpoint has none.
func (w *Weights) Shape(name string) []int {
	e, ok := w.f.Entries[name]
	if !ok {
		return nil
	}
	return e.Shape
}

// Read copies tensor name into dst (as many values as the tensor has).
func (w *Weights) Read(name string, dst []float32) error {
	if err := w.f.float32s(name, dst); err != nil {
		return fmt.Errorf("weights %s: %w", w.Path, err)
	}
	return nil
}
