package datasets

import (
	"math"
	"slices"
	"testing"
)

// TestSyntheticTokensWindows: windows are stride-T windows of one stream
// (window i's last target is window i+1's first token), every token is in
// the vocabulary, the same seed gives the same bits and another seed others,
// and the validation part continues the training part's stream.
func TestSyntheticTokensWindows(t *testing.T) {
	const n, ctx, vocab = 50, 16, 50304
	tr, va, err := SyntheticTokenSplit(n, 4, ctx, vocab, 7)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Len() != n || va.Len() != 4 {
		t.Fatalf("Len %d and %d", tr.Len(), va.Len())
	}
	if s := tr.Spec(); !s.Tokens || !slices.Equal(s.Input, []int{ctx}) || s.Targets != ctx || s.Classes != vocab {
		t.Fatalf("Spec %+v", s)
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	b := Batch{Tokens: make([]int32, n*ctx), Y: make([]int32, n*ctx)}
	tr.GatherBatch(idx, b)
	seen := map[int32]bool{}
	for i := range n {
		x, y := b.Tokens[i*ctx:(i+1)*ctx], b.Y[i*ctx:(i+1)*ctx]
		if !slices.Equal(x[1:], y[:ctx-1]) {
			t.Fatalf("window %d: targets are not the inputs shifted by one", i)
		}
		if i+1 < n && y[ctx-1] != b.Tokens[(i+1)*ctx] {
			t.Fatalf("window %d's last target %d is not window %d's first token %d", i, y[ctx-1], i+1, b.Tokens[(i+1)*ctx])
		}
		for _, v := range x {
			if v < 0 || v >= vocab {
				t.Fatalf("token %d outside the vocabulary", v)
			}
			seen[v] = true
		}
	}
	if len(seen) < n*ctx*9/10 { // 800 draws from 50304 values: few repeats
		t.Errorf("%d distinct tokens in %d", len(seen), n*ctx)
	}
	// Validation window 0 continues the stream after training window n-1.
	v := Batch{Tokens: make([]int32, ctx), Y: make([]int32, ctx)}
	va.GatherBatch([]int{0}, v)
	if v.Tokens[0] != b.Y[n*ctx-1] {
		t.Errorf("validation starts with %d, training ends with %d", v.Tokens[0], b.Y[n*ctx-1])
	}
	again, _ := NewSyntheticTokens(n, ctx, vocab, 7)
	c := Batch{Tokens: make([]int32, ctx), Y: make([]int32, ctx)}
	again.GatherBatch([]int{17}, c)
	if !slices.Equal(c.Tokens, b.Tokens[17*ctx:18*ctx]) || !slices.Equal(c.Y, b.Y[17*ctx:18*ctx]) {
		t.Error("the same seed gave other tokens")
	}
	other, _ := NewSyntheticTokens(n, ctx, vocab, 8)
	other.GatherBatch([]int{17}, c)
	if slices.Equal(c.Tokens, b.Tokens[17*ctx:18*ctx]) {
		t.Error("another seed gave the same tokens")
	}
}

// TestSyntheticTokensFixedBits pins the stream: a change to the generator
// changes every benchmark's data and must be deliberate.
func TestSyntheticTokensFixedBits(t *testing.T) {
	d, err := NewSyntheticTokens(2, 4, 256, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := Batch{Tokens: make([]int32, 8), Y: make([]int32, 8)}
	d.GatherBatch([]int{1, -1}, b)
	got := append(append([]int32{}, b.Tokens...), b.Y...)
	// stream positions 4..8 of seed 1: the top byte of SplitMix64's
	// outputs there (checked by hand in Python), then the padding row
	want := []int32{48, 36, 220, 234, 0, 0, 0, 0, 36, 220, 234, 140, -1, -1, -1, -1}
	if !slices.Equal(got, want) {
		t.Errorf("window 1 and padding: %v, want %v", got, want)
	}
}

func TestSyntheticTokensErrorsAndAllocs(t *testing.T) {
	for _, c := range []struct{ n, ctx, vocab int }{{0, 4, 256}, {4, 0, 256}, {4, 4, 0}, {4, 4, math.MaxInt32 + 1}} {
		if _, err := NewSyntheticTokens(c.n, c.ctx, c.vocab, 1); err == nil {
			t.Errorf("NewSyntheticTokens(%d, %d, %d) succeeded", c.n, c.ctx, c.vocab)
		}
	}
	if _, _, err := SyntheticTokenSplit(4, 0, 4, 256, 1); err == nil {
		t.Error("an empty validation part was accepted")
	}
	d, _ := NewSyntheticTokens(64, 128, 256, 1)
	b := Batch{Tokens: make([]int32, 4*128), Y: make([]int32, 4*128)}
	idx := []int{3, 1, 63, 0}
	if a := testing.AllocsPerRun(10, func() { d.GatherBatch(idx, b) }); a != 0 {
		t.Errorf("GatherBatch allocates %v times", a)
	}
	for _, bad := range [][]int{{64}, {-2}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("GatherBatch(%v) did not panic", bad)
				}
			}()
			d.GatherBatch(bad, b)
		}()
	}
}
