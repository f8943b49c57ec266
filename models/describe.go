package models

import "github.com/symddp/symddp/compute"

// What a model may say about itself to the trainer and the train command,
// so that they hold no type switch on a model: a model registered by a
// program of its own gets MFU and the memory check as the GPT does by
// implementing these.

// FLOPsCounter is a model that states the arithmetic of training on one
// token (forward and backward, the model's own operations only: not what an
// implementation adds by recomputing), for the MFU that train prints.
type FLOPsCounter interface {
	FLOPsPerToken() float64
}

// Recomputer is a model that recomputes activations in backward
// (Config.Recompute) and says in which mode it was built, so that train
// refuses a mode that a model would ignore.
type Recomputer interface {
	Recompute() Recompute
}

// ActivationSizer is a model that states the memory its activations take
// for a micro-batch of seqs sequences (or samples) on the CPU engine, in
// bytes (in the recompute mode it was built with, when it is a
// Recomputer), so that train can refuse a run that does not fit before it
// starts.
type ActivationSizer interface {
	ActivationBytes(seqs int) int64
}

// PrecisionSetter is a model that can compute in more than fp32 (every
// Decoder: bf16 on an engine with a bf16 form of its layers). Its factory applies Config.Precision
// through SetPrecision; the train command offers --precision bf16 only to
// models that implement it, and refuses it for the others before any PE
// starts (they compute in fp32).
type PrecisionSetter interface {
	SetPrecision(p compute.Precision) error
	Precision() compute.Precision
}

// BuildReporter is a model that says, after Build, how it runs when that
// deserves a line in the run's log: which kernels an engine chose for it,
// or (warn) a slower fallback and why. "" says nothing.
type BuildReporter interface {
	BuildReport() (line string, warn bool)
}

// TrainingDefaults are what a model trains with where the command line
// does not choose (torchtitan's train spec does the same): the train
// command applies each non-zero field to the flag the user left out, and
// records the result in the run's recipe. Zero fields leave the command's
// own defaults.
type TrainingDefaults struct {
	Dataset string // a dataset name: "text"
	Batch   int    // the global batch in samples (sequences), over all PEs (--batch-size)
	Steps   int    // optimizer steps, when neither steps nor epochs are given
	// Optimizer names the optimizer; WeightDecay and Beta2 apply when the
	// run uses it (another optimizer keeps its own defaults).
	Optimizer   string
	WeightDecay float32
	Beta2       float32
	// WarmupSteps is the learning-rate warm-up, at most a tenth of a run
	// with fewer than ten times as many steps.
	WarmupSteps int
	ClipNorm    float32 // the global gradient norm to clip at
	EvalEvery   int     // steps between validations
	EvalBatches int     // batches per validation
	LogEvery    int     // steps between log lines
}

// Defaulter is a model with training defaults of its own.
type Defaulter interface {
	TrainingDefaults() TrainingDefaults
}

// LanguageModelDefaults is the recipe GPT-2 and nanoGPT train with: byte
// text, 400 steps of 16 sequences, AdamW (betas 0.9 and 0.95, weight decay
// 0.1 on matrices), 20 warm-up steps then cosine, clipping at norm 1,
// validation every 100 steps on 20 batches. A model that reads tokens
// trains with it unless it is a Defaulter.
var LanguageModelDefaults = TrainingDefaults{
	Dataset: "text", Batch: 16, Steps: 400,
	Optimizer: "adamw", WeightDecay: 0.1, Beta2: 0.95,
	WarmupSteps: 20, ClipNorm: 1, EvalEvery: 100, EvalBatches: 20, LogEvery: 20,
}

// DefaultsOf is m's training defaults: its own (Defaulter), else
// LanguageModelDefaults for a model that reads tokens; false for a model
// with none.
func DefaultsOf(m Model) (TrainingDefaults, bool) {
	if d, ok := m.(Defaulter); ok {
		return d.TrainingDefaults(), true
	}
	if m.Data().Tokens {
		return LanguageModelDefaults, true
	}
	return TrainingDefaults{}, false
}
