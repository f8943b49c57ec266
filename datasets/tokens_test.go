package datasets

import (
	"slices"
	"strings"
	"testing"
)

// iota16 returns n tokens from, from+1, ...
func iota16(from, n int) []uint16 {
	s := make([]uint16, n)
	for i := range s {
		s[i] = uint16(from + i)
	}
	return s
}

// gatherOne returns the inputs and targets of window i.
func gatherOne(t *testing.T, d *TokenSource, i int) (x, y []int32) {
	t.Helper()
	c := d.Context()
	x, y = make([]int32, c), make([]int32, c)
	d.GatherBatch([]int{i}, Batch{Tokens: x, Y: y})
	return x, y
}

func int32s(from, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(from + i)
	}
	return s
}

func TestTokenSourceWindows(t *testing.T) {
	// 21 tokens, T = 4: (21-1)/4 = 5 windows, window i = tokens [4i, 4i+5).
	d, err := NewTokenSource([][]byte{ramp(21)}, 4, 256)
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != 5 || d.Tokens() != 21 || d.Streams() != 1 || d.Mapped() {
		t.Fatalf("Len %d Tokens %d Streams %d Mapped %v, want 5 21 1 false", d.Len(), d.Tokens(), d.Streams(), d.Mapped())
	}
	spec := d.Spec()
	if !slices.Equal(spec.Input, []int{4}) || !spec.Tokens || spec.Targets != 4 || spec.Classes != 256 {
		t.Fatalf("Spec %+v", spec)
	}
	for i := range 5 {
		x, y := gatherOne(t, d, i)
		if !slices.Equal(x, int32s(4*i, 4)) || !slices.Equal(y, int32s(4*i+1, 4)) {
			t.Fatalf("window %d: inputs %v targets %v", i, x, y)
		}
	}
}

func TestTokenSourceStreamsDoNotStraddle(t *testing.T) {
	// Streams of 10 and 7 tokens, T = 3: 3 windows, then 2; the last token
	// of the first stream (9) and of the second (106) are in no window.
	d, err := NewTokenSource([][]uint16{iota16(0, 10), iota16(100, 7)}, 3, 200)
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != 5 || d.Tokens() != 17 {
		t.Fatalf("Len %d Tokens %d, want 5 and 17", d.Len(), d.Tokens())
	}
	want := [][2][]int32{
		{{0, 1, 2}, {1, 2, 3}}, {{3, 4, 5}, {4, 5, 6}}, {{6, 7, 8}, {7, 8, 9}},
		{{100, 101, 102}, {101, 102, 103}}, {{103, 104, 105}, {104, 105, 106}},
	}
	for i, w := range want {
		if x, y := gatherOne(t, d, i); !slices.Equal(x, w[0]) || !slices.Equal(y, w[1]) {
			t.Fatalf("window %d: inputs %v targets %v, want %v %v", i, x, y, w[0], w[1])
		}
	}
}

func TestTokenSourceBatchAndPadding(t *testing.T) {
	d, err := NewTokenSource([][]uint32{{7, 1 << 20, 3, 4, 5}}, 2, 1<<21)
	if err != nil {
		t.Fatal(err)
	}
	x := slices.Repeat([]int32{99}, 6)
	y := slices.Repeat([]int32{99}, 6)
	d.GatherBatch([]int{1, -1, 0}, Batch{Tokens: x, Y: y})
	if !slices.Equal(x, []int32{3, 4, 0, 0, 7, 1 << 20}) || !slices.Equal(y, []int32{4, 5, -1, -1, 1 << 20, 3}) {
		t.Fatalf("inputs %v targets %v", x, y)
	}
}

func TestTokenSourceGatherDoesNotAllocate(t *testing.T) {
	d, err := NewTokenSource([][]uint16{iota16(0, 1000), iota16(0, 500)}, 16, 1000)
	if err != nil {
		t.Fatal(err)
	}
	idx := []int{0, 61, 62, 90, -1, 30}
	b := Batch{Tokens: make([]int32, 6*16), Y: make([]int32, 6*16)}
	if a := testing.AllocsPerRun(100, func() { d.GatherBatch(idx, b) }); a != 0 {
		t.Fatalf("GatherBatch allocates %v times", a)
	}
}

func TestTokenSourceErrors(t *testing.T) {
	cases := []struct {
		name string
		make func() error
		want string
	}{
		{"token outside vocabulary", func() error {
			_, err := NewTokenSource([][]uint16{{1, 2}, {3, 50257, 4}}, 1, 50257)
			return err
		}, "token 50257 at position 1 of stream 1 is outside the vocabulary of 50257"},
		{"byte outside small vocabulary", func() error {
			_, err := NewTokenSource([][]byte{{1, 2, 65}}, 1, 65)
			return err
		}, "token 65 at position 2 of stream 0 is outside the vocabulary of 65"},
		{"no window", func() error {
			_, err := NewTokenSource([][]byte{ramp(4), ramp(4)}, 4, 256)
			return err
		}, "8 tokens in 2 streams hold no window of 5 tokens: use more data or a shorter context"},
		{"no stream", func() error {
			_, err := NewTokenSource([][]byte{}, 4, 256)
			return err
		}, "0 tokens in 0 streams hold no window of 5 tokens"},
		{"context", func() error {
			_, err := NewTokenSource([][]byte{ramp(4)}, 0, 256)
			return err
		}, "context of 0 tokens: must be positive"},
		{"vocabulary", func() error {
			_, err := NewTokenSource([][]byte{ramp(4)}, 1, 0)
			return err
		}, "vocabulary of 0 tokens: want 1 to 2147483647"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.make()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestTokenSourceGatherPanics(t *testing.T) {
	d, err := NewTokenSource([][]byte{ramp(9)}, 4, 256)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		idx  []int
		rows int
		want string
	}{
		{"index past the end", []int{2}, 1, "datasets: GatherBatch index 2 outside [0, 2)"},
		{"negative index", []int{-2}, 1, "datasets: GatherBatch index -2 outside [0, 2)"},
		{"short buffers", []int{0, 1}, 1, "datasets: GatherBatch of 2 windows of 4 tokens into tokens of 4 and targets of 4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != c.want {
					t.Fatalf("panic %v, want %q", r, c.want)
				}
			}()
			d.GatherBatch(c.idx, Batch{Tokens: make([]int32, 4*c.rows), Y: make([]int32, 4*c.rows)})
		})
	}
}

// BenchmarkTokenGatherBatch8x1024 gathers 8 random windows of 1024 uint16
// tokens from 64 Mi tokens in 4 streams, as one PE's step of GPT-2 small.
func BenchmarkTokenGatherBatch8x1024(b *testing.B) {
	const streams, perStream, context, rows = 4, 16 << 20, 1024, 8
	segs := make([][]uint16, streams)
	for k := range segs {
		segs[k] = iota16(k, perStream)
	}
	d, err := NewTokenSource(segs, context, 1<<16)
	if err != nil {
		b.Fatal(err)
	}
	r := newRNG(1, 0, 0)
	idx := make([]int, rows)
	batch := Batch{Tokens: make([]int32, rows*context), Y: make([]int32, rows*context)}
	b.SetBytes(rows * context * 2)
	for b.Loop() {
		for i := range idx {
			idx[i] = int(r.next() % uint64(d.Len()))
		}
		d.GatherBatch(idx, batch)
	}
}
