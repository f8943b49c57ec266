package models

import "fmt"

// Recompute says which activations a transformer (GPT, Llama) does not
// keep from forward and recomputes in backward instead (llm.c's -r,
// torchtitan's activation checkpointing). Every mode computes the same
// gradients, bit for bit: it trades memory for arithmetic, nothing else.
type Recompute string

// Recompute modes ("" is RecomputeNone).
const (
	// RecomputeNone keeps every activation.
	RecomputeNone Recompute = "none"
	// RecomputeGELU keeps the MLP's activation output, its widest
	// activation (a GPT's gelu(c_fc(x)), R×4C; a Llama's silu(gate)·up,
	// R×FFN), in one buffer that every layer shares, and recomputes it in
	// backward: one elementwise pass per layer. fp32 only: a model that
	// would run in bf16 refuses it at Build.
	RecomputeGELU Recompute = "gelu"
	// RecomputeBlock keeps only each transformer block's input (the
	// residual stream); the blocks' activations live in memory that all
	// blocks share, and each block's backward runs its forward again first
	// (Checkpoint): about one more forward of every block a step. In fp32
	// and bf16 (where the stream kept is bf16).
	RecomputeBlock Recompute = "block"
)

// RecomputeModes are the modes, for help texts and errors.
var RecomputeModes = []Recompute{RecomputeNone, RecomputeGELU, RecomputeBlock}

// ParseRecompute reads a mode by name ("" is none).
func ParseRecompute(s string) (Recompute, error) {
	if s == "" {
		return RecomputeNone, nil
	}
	for _, r := range RecomputeModes {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("recompute %q: want none, gelu or block", s)
}

// recomputePools are the pools a transformer's layers take for a mode:
// blocks for the checkpoints of RecomputeBlock, hidden for the MLPs of
// RecomputeGELU (nil where the mode has none).
func recomputePools(r Recompute) (blocks, hidden *ScratchPool) {
	switch r {
	case RecomputeBlock:
		return NewScratchPool(), nil
	case RecomputeGELU:
		return nil, NewScratchPool()
	}
	return nil, nil
}
