package ddp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// ReadWeights reads a checkpoint file, or the newest valid checkpoint of a
// checkpoint directory, and verifies its SHA-256.
func ReadWeights(path string) (*Weights, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		names, err := listCheckpoints(path)
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("read weights: no checkpoint in %s", path)
		}
		var firstErr error
		for _, name := range names { // newest first
			w, err := ReadWeights(name)
			if err == nil {
				return w, nil
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		return nil, firstErr
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read weights: %w", err)
	}
	f, err := parseSafetensors(b)
	if err != nil {
		return nil, fmt.Errorf("read weights %s: %w", path, err)
	}
	var meta ckptMeta
	if err := json.Unmarshal([]byte(f.Meta["symddp"]), &meta); err != nil || meta.Format != ckptFormat {
		return nil, fmt.Errorf("read weights %s: %w: no %s metadata", path, ErrCorrupt, ckptFormat)
	}
	h := sha256.Sum256(f.Data)
	if hex.EncodeToString(h[:]) != f.Meta["sha256"] {
		return nil, fmt.Errorf("read weights %s: %w: SHA-256 of the data does not match the header", path, ErrCorrupt)
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
