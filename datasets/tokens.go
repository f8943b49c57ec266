package datasets

import (
	"fmt"
	"math"
	"sort"
)

// Token is the element type of a token stream: bytes (byte-level text,
// vocabulary 256), uint16 (llm.c's GPT-2 shards) or uint32 (llm.c's Llama 3
// shards).
type Token interface {
	uint8 | uint16 | uint32
}

// TokenSource is a Source of language-model windows cut from token streams.
// A stream of n tokens holds (n-1)/T windows of T+1 tokens, stride T: window
// i covers tokens [i·T, i·T+T+1), its inputs are tokens [i·T, i·T+T) and its
// targets, the next token at every position, [i·T+1, i·T+T+1). Consecutive
// windows share one token; the last (n-1) mod T tokens of a stream are in no
// window.
//
// A TokenSource over several streams (the shards of a split) numbers the
// windows of the first stream first, then those of the second, and so on: a
// window never straddles two streams. The streams may live in read-only
// memory mappings (LoadShards, LoadCorpus), shared by the processes of a
// host; Close releases them.
type TokenSource struct {
	spec    Spec
	context int
	segs    []tokenSegment
	ends    []int // ends[k]: windows in segments 0..k
	tokens  int   // tokens over all segments
	maps    []*mapping
}

var _ Source = (*TokenSource)(nil)

// tokenSegment is one token stream; exactly one of its slices is set.
type tokenSegment struct {
	u8  []byte
	u16 []uint16
	u32 []uint32
}

func (s tokenSegment) len() int { return len(s.u8) + len(s.u16) + len(s.u32) }

// NewTokenSource returns the windows of context tokens (plus one target)
// over streams, without copying them, for a vocabulary of vocab tokens. It
// checks that every token is below vocab (a byte stream with vocab >= 256
// and a uint16 one with vocab >= 65536 need no look). Streams shorter than
// context+1 tokens hold no window; the source must hold at least one.
func NewTokenSource[T Token](streams [][]T, context, vocab int) (*TokenSource, error) {
	if err := checkWindowArgs(context, vocab); err != nil {
		return nil, err
	}
	segs := make([]tokenSegment, len(streams))
	for k, s := range streams {
		segs[k] = makeSegment(s)
		if i, tok := firstOutside(segs[k], vocab); i >= 0 {
			return nil, fmt.Errorf("token %d at position %d of stream %d is outside the vocabulary of %d", tok, i, k, vocab)
		}
	}
	return newTokenSource(segs, context, vocab)
}

// makeSegment wraps a stream without copying it.
func makeSegment[T Token](s []T) tokenSegment {
	switch v := any(s).(type) {
	case []uint8:
		return tokenSegment{u8: v}
	case []uint16:
		return tokenSegment{u16: v}
	}
	return tokenSegment{u32: any(s).([]uint32)}
}

// newTokenSource checks the sizes and builds the window index; the tokens
// are already checked against vocab.
func newTokenSource(segs []tokenSegment, context, vocab int) (*TokenSource, error) {
	if err := checkWindowArgs(context, vocab); err != nil {
		return nil, err
	}
	d := &TokenSource{
		spec:    Spec{Input: []int{context}, Tokens: true, Targets: context, Classes: vocab},
		context: context,
		segs:    segs,
		ends:    make([]int, len(segs)),
	}
	n := 0
	for k, s := range segs {
		if l := s.len(); l > 0 {
			n += (l - 1) / context
			d.tokens += l
		}
		d.ends[k] = n
	}
	if n == 0 {
		streams := fmt.Sprintf("%d streams hold", len(segs))
		if len(segs) == 1 {
			streams = "1 stream holds"
		}
		return nil, fmt.Errorf("%d tokens in %s no window of %d tokens: use more data or a shorter context",
			d.tokens, streams, context+1)
	}
	return d, nil
}

// checkWindowArgs checks a context length and a vocabulary size.
func checkWindowArgs(context, vocab int) error {
	switch {
	case context <= 0:
		return fmt.Errorf("context of %d tokens: must be positive", context)
	case vocab <= 0 || vocab > math.MaxInt32:
		return fmt.Errorf("vocabulary of %d tokens: want 1 to %d", vocab, math.MaxInt32)
	}
	return nil
}

// firstOutside returns the position and value of the first token of s that
// is not below vocab, or -1. It first scans for the maximum (a loop the
// compiler keeps branch-free), and looks for the position only when the
// maximum is too large.
func firstOutside(s tokenSegment, vocab int) (int, uint32) {
	switch {
	case s.u8 != nil && vocab < 1<<8:
		return firstAbove(s.u8, vocab)
	case s.u16 != nil && vocab < 1<<16:
		return firstAbove(s.u16, vocab)
	case s.u32 != nil && int64(vocab) < 1<<32:
		return firstAbove(s.u32, vocab)
	}
	return -1, 0
}

func firstAbove[T Token](s []T, vocab int) (int, uint32) {
	var m T
	for _, v := range s {
		m = max(m, v)
	}
	if int64(m) < int64(vocab) {
		return -1, 0
	}
	for i, v := range s {
		if int64(v) >= int64(vocab) {
			return i, uint32(v)
		}
	}
	return -1, 0
}

// Len is the number of windows.
func (d *TokenSource) Len() int { return d.ends[len(d.ends)-1] }

// Spec is {Input: [T], Tokens: true, Targets: T, Classes: vocabulary}. The
// caller must not modify its Input.
func (d *TokenSource) Spec() Spec { return d.spec }

// Context is T, the input tokens of one window.
func (d *TokenSource) Context() int { return d.context }

// Vocab is the size of the vocabulary; every token is below it.
func (d *TokenSource) Vocab() int { return d.spec.Classes }

// Tokens is the number of tokens of all streams, those in no window included.
func (d *TokenSource) Tokens() int { return d.tokens }

// Unread is the number of tokens no window reads: the end of each stream
// shorter than a window of T+1 tokens (its last (n−1) mod T tokens), and
// the whole of a stream that holds no window.
func (d *TokenSource) Unread() int {
	n, prev := 0, 0
	for k, s := range d.segs {
		n += s.len()
		if w := d.ends[k] - prev; w > 0 { // the stream's windows
			n -= w*d.context + 1
		}
		prev = d.ends[k]
	}
	return n
}

// Streams is the number of token streams (shards, or 1).
func (d *TokenSource) Streams() int { return len(d.segs) }

// Mapped reports whether the tokens live in memory mappings of files.
func (d *TokenSource) Mapped() bool { return len(d.maps) > 0 }

// LabelledTargets is T for each window of idx: every position of a window
// has its next token.
func (d *TokenSource) LabelledTargets(idx []int) int { return samples(idx) * d.context }

// GatherBatch writes window idx[r]'s inputs into b.Tokens[r·T:(r+1)·T] and
// its targets into b.Y[r·T:(r+1)·T]; an index of -1 is padding (inputs 0,
// targets -1). It does not allocate. It panics when an index is out of range
// or a buffer is too short: those are programming errors.
//
//	b.Tokens is (len(idx), T), b.Y is (len(idx), T)
func (d *TokenSource) GatherBatch(idx []int, b Batch) {
	t := d.context
	gatherWindows(idx, b, t, d.Len(), func(i int, x, y []int32) {
		k := 0
		if len(d.ends) > 1 {
			k = sort.SearchInts(d.ends, i+1)
		}
		if k > 0 {
			i -= d.ends[k-1]
		}
		switch s, lo := d.segs[k], i*t; {
		case s.u8 != nil:
			copyWindow(x, y, s.u8[lo:lo+t+1])
		case s.u16 != nil:
			copyWindow(x, y, s.u16[lo:lo+t+1])
		default:
			copyWindow(x, y, s.u32[lo:lo+t+1])
		}
	})
}

// gatherWindows is the frame of a token source's GatherBatch: it checks
// b's room for len(idx) windows of t tokens, writes padding (tokens 0,
// targets -1) for index -1, panics for an index outside [0, n), and calls
// window for the rest with the window's rows of b.Tokens and b.Y.
func gatherWindows(idx []int, b Batch, t, n int, window func(i int, x, y []int32)) {
	if len(b.Tokens) < len(idx)*t || len(b.Y) < len(idx)*t {
		panic(fmt.Sprintf("datasets: GatherBatch of %d windows of %d tokens into tokens of %d and targets of %d",
			len(idx), t, len(b.Tokens), len(b.Y)))
	}
	for r, i := range idx {
		x, y := b.Tokens[r*t:(r+1)*t], b.Y[r*t:(r+1)*t]
		if i == -1 {
			clear(x)
			for j := range y {
				y[j] = -1
			}
			continue
		}
		if i < 0 || i >= n {
			panic(fmt.Sprintf("datasets: GatherBatch index %d outside [0, %d)", i, n))
		}
		window(i, x, y)
	}
}

// copyWindow writes w[:T] into x and w[1:] into y; len(w) == T+1.
func copyWindow[T Token](x, y []int32, w []T) {
	w = w[:len(x)+1]
	for j := range x {
		x[j] = int32(w[j])
	}
	for j := range y {
		y[j] = int32(w[j+1])
	}
}

// Close releases the memory mappings the tokens live in, if any; after
// Close, d must not be used. A second Close does nothing.
func (d *TokenSource) Close() error {
	var first error
	for _, m := range d.maps {
		if err := m.close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
