package models

import "github.com/symddp/symddp/compute"

// Footprint is what a model needs on one PE: its parameters and an
// estimate of the memory they and a build's activations take.
type Footprint struct {
	// Params is the number of parameters (a tied weight counted once).
	Params int64
	// ArenaBytes is the fp32 parameter and gradient arenas plus the
	// optimizer's state slots, one fp32 per parameter each, all on every
	// PE (the replicated update; the sharded one keeps 1/PEs of the state).
	ArenaBytes int64
	// CopyBytes is the bf16 copy of the weights that a model running in
	// bf16 reads (2 bytes a parameter); 0 in fp32.
	CopyBytes int64
	// ActivationBytes is the model's estimate of the activations
	// (ActivationSizer), -1 when it gives none.
	ActivationBytes int64
}

// Bytes is the estimate per PE: the arenas, the bf16 copy of the weights
// and the activations (none when the model gives no activation estimate).
func (f Footprint) Bytes() int64 { return f.ArenaBytes + f.CopyBytes + max(0, f.ActivationBytes) }

// FootprintOf estimates m's memory per PE for a micro-batch of seqs samples
// and an optimizer with optimizerSlots state slots (optim.Optimizer.Slots:
// 2 for Adam and AdamW, 1 for SGD with momentum), in the precision m runs
// in (PrecisionSetter: bf16 when set so, or after a Build that chose it;
// fp32 otherwise). Building the model is not needed: the parameters are
// counted from Params.
func FootprintOf(m Model, seqs, optimizerSlots int) Footprint {
	var n int64
	for _, p := range m.Params() {
		n += int64(p.Size())
	}
	f := Footprint{Params: n, ArenaBytes: 4 * n * int64(2+optimizerSlots), ActivationBytes: -1}
	if p, ok := m.(PrecisionSetter); ok && p.Precision() == compute.PrecisionBF16 {
		f.CopyBytes = 2 * n
	}
	if e, ok := m.(ActivationSizer); ok {
		f.ActivationBytes = e.ActivationBytes(seqs)
	}
	return f
}
