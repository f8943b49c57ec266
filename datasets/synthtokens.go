package datasets

import (
	"fmt"
	"math"
)

// domainTokens keeps the synthetic token stream apart from the package's
// other uses of a seed.
const domainTokens uint64 = 0x746f_6b65_6e73_5f5f // "tokens__"

// SyntheticTokens is a token Source for measuring speed: n windows of
// context tokens at stride context over one pseudo-random stream of tokens
// uniform in [0, vocab), as a token file's windows are (window i holds
// stream positions i·T .. i·T+T, its targets the next token of each). Token
// p of the stream is a function of the seed and p alone, computed when a
// batch is gathered: it needs no memory, no file and no download, and a
// batch of B windows costs B·(T+1) SplitMix64 outputs. The tokens are
// independent, so a model cannot learn them: the loss stays near ln(vocab).
type SyntheticTokens struct {
	n, context int
	first      uint64 // stream position of window 0's first token
	base       uint64 // the stream's generator state before position 0
	spec       Spec
}

var _ Source = (*SyntheticTokens)(nil)

// NewSyntheticTokens returns n windows of context tokens over a vocabulary
// of vocab, from the stream of seed.
func NewSyntheticTokens(n, context, vocab int, seed uint64) (*SyntheticTokens, error) {
	return syntheticTokens(n, context, vocab, seed, 0)
}

// SyntheticTokenSplit returns nTrain training windows and the nVal windows
// that follow them in the same stream, for validation.
func SyntheticTokenSplit(nTrain, nVal, context, vocab int, seed uint64) (train, val *SyntheticTokens, err error) {
	if nTrain <= 0 || nVal <= 0 {
		return nil, nil, fmt.Errorf("synthetic tokens %d/%d windows: both parts need at least one", nTrain, nVal)
	}
	if train, err = syntheticTokens(nTrain, context, vocab, seed, 0); err != nil {
		return nil, nil, err
	}
	val, err = syntheticTokens(nVal, context, vocab, seed, uint64(nTrain)*uint64(context))
	return train, val, err
}

func syntheticTokens(n, context, vocab int, seed, first uint64) (*SyntheticTokens, error) {
	if n <= 0 {
		return nil, fmt.Errorf("synthetic tokens: %d windows: need at least one", n)
	}
	if err := checkWindowArgs(context, vocab); err != nil {
		return nil, err
	}
	if uint64(n) > (math.MaxUint64-first)/uint64(context+1) { // positions must not wrap
		return nil, fmt.Errorf("synthetic tokens: %d windows of %d tokens: too many", n, context)
	}
	r := newRNG(seed, domainTokens, 0)
	return &SyntheticTokens{n: n, context: context, first: first, base: r.state,
		spec: Spec{Input: []int{context}, Tokens: true, Targets: context, Classes: vocab}}, nil
}

// Len is the number of windows.
func (d *SyntheticTokens) Len() int { return d.n }

// Spec is [T] token inputs, T targets, the vocabulary as classes.
func (d *SyntheticTokens) Spec() Spec { return d.spec }

// token is stream position p's token: the SplitMix64 output at p, reduced
// to the vocabulary without bias (a rejection, rare, reads the outputs after
// it, and is as deterministic).
func (d *SyntheticTokens) token(p uint64) int32 {
	r := rng{state: d.base + p*golden}
	return int32(r.bounded(uint64(d.spec.Classes)))
}

// LabelledTargets is T for each window of idx.
func (d *SyntheticTokens) LabelledTargets(idx []int) int { return samples(idx) * d.context }

// GatherBatch writes window idx[r]'s tokens into b.Tokens[r·T:(r+1)·T] and
// the next token of each into b.Y[r·T:(r+1)·T]; an index of -1 is padding
// (inputs 0, targets -1). It does not allocate, and panics on an index out
// of range or a short buffer (programming errors).
//
//	b.Tokens is (len(idx), T), b.Y is (len(idx), T)
func (d *SyntheticTokens) GatherBatch(idx []int, b Batch) {
	t := d.context
	gatherWindows(idx, b, t, d.n, func(i int, x, y []int32) {
		p := d.first + uint64(i)*uint64(t)
		prev := d.token(p)
		for j := range x {
			next := d.token(p + uint64(j) + 1)
			x[j], y[j] = prev, next
			prev = next
		}
	})
}
