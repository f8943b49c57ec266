package models

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
