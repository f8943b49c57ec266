package datasets

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// gatherSources are one source of each concurrent kind: float rows, byte
// rows decoded by table, token windows, computed token windows.
func gatherSources(t *testing.T, dim int) map[string]Source {
	t.Helper()
	fl, err := Synthetic(600, dim, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	y := make([]int32, 600)
	for i := range y {
		y[i] = int32(i % 10)
	}
	by, err := NewByteSamples(ramp(600*dim), y, []int{dim}, 10)
	if err != nil {
		t.Fatal(err)
	}
	by.Normalize(0.3, 0.7)
	text := make([]byte, 600*dim+1)
	for i := range text {
		text[i] = byte(i * 31 / 7)
	}
	tok, err := NewTokenSource([][]byte{text}, dim, 256)
	if err != nil {
		t.Fatal(err)
	}
	syn, err := NewSyntheticTokens(600, dim, 50, 9)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Source{"float": fl, "bytes": by, "tokens": tok, "synthetic tokens": syn}
}

// batchFor is room for rows of src's samples.
func batchFor(s Spec, rows int) Batch {
	b := Batch{Y: make([]int32, rows*s.Targets)}
	if s.Tokens {
		b.Tokens = make([]int32, rows*s.InputSize())
	} else {
		b.X = make([]float32, rows*s.InputSize())
	}
	return b
}

func sameBatch(a, b Batch) bool {
	return slices.Equal(a.Tokens, b.Tokens) && slices.Equal(a.Y, b.Y) &&
		slices.EqualFunc(a.X, b.X, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// indices is rows indices of an n-sample source in a scrambled order, some
// of them padding (-1).
func indices(rows, n int) []int {
	idx := make([]int, rows)
	for i := range idx {
		idx[i] = (i*379 + 11) % n
		if i%9 == 4 {
			idx[i] = -1
		}
	}
	return idx
}

// A split gather writes the bytes one GatherBatch call writes, for every
// concurrent source and any number of runs, uneven runs included.
func TestGathererMatchesGatherBatch(t *testing.T) {
	for name, src := range gatherSources(t, 13) {
		spec := src.Spec()
		for _, rows := range []int{1, 2, 7, 37} {
			idx := indices(rows, src.Len())
			want := batchFor(spec, rows)
			src.GatherBatch(idx, want)
			for parts := 2; parts <= 5; parts++ {
				g := NewGatherer(spec)
				g.split, g.maxParts = 0, parts
				got := batchFor(spec, rows)
				for k := range got.Y { // what the gather must overwrite
					got.Y[k] = 77
				}
				g.Gather(src, idx, got)
				g.Close()
				if !sameBatch(got, want) {
					t.Fatalf("%s, %d rows in %d runs: %+v, want %+v", name, rows, parts, got, want)
				}
			}
		}
	}
}

// With the default threshold (256 KiB, runs of at least 128 KiB) a
// Fashion-MNIST-sized batch of 64 rows (0.2 MB) is not split, one of 128
// (0.4 MB) in 3 runs, 256 rows and more in 4; other sources and buffers too
// short are never split.
func TestGathererSplitsLargeBatches(t *testing.T) {
	src := gatherSources(t, 784)["bytes"]
	g := NewGatherer(src.Spec())
	defer g.Close()
	g.maxParts = 4
	for _, c := range []struct {
		rows, parts int
	}{{64, 1}, {128, 3}, {256, 4}, {4096, 4}} {
		if got := g.parts(src, batchFor(src.Spec(), c.rows), c.rows); got != c.parts {
			t.Errorf("%d rows of 784: %d runs, want %d", c.rows, got, c.parts)
		}
	}
	if got := g.parts(AsSource(serialDataset{src.(*ByteSamples)}), batchFor(src.Spec(), 4096), 4096); got != 1 {
		t.Errorf("a Dataset of its own: %d runs, want 1", got)
	}
	if got := g.parts(&countingSource{ByteSamples: src.(*ByteSamples)}, batchFor(src.Spec(), 4096), 4096); got != 1 {
		t.Errorf("a source embedding a concurrent one: %d runs, want 1", got)
	}
	if got := g.parts(src, batchFor(src.Spec(), 4000), 4096); got != 1 {
		t.Errorf("a batch too short: %d runs, want 1 (GatherBatch's own panic)", got)
	}
	idx := indices(512, src.Len())
	want, got := batchFor(src.Spec(), 512), batchFor(src.Spec(), 512)
	src.GatherBatch(idx, want)
	g.Gather(src, idx, got)
	if !sameBatch(got, want) {
		t.Error("a split batch of 512 rows differs from GatherBatch's")
	}
}

// serialDataset is a Dataset of its own (not a ConcurrentSource).
type serialDataset struct{ b *ByteSamples }

func (d serialDataset) Len() int                                 { return d.b.Len() }
func (d serialDataset) SampleShape() []int                       { return d.b.SampleShape() }
func (d serialDataset) Classes() int                             { return d.b.Classes() }
func (d serialDataset) Gather(idx []int, x []float32, y []int32) { d.b.Gather(idx, x, y) }

// countingSource embeds a ConcurrentSource and counts its GatherBatch
// calls, which is not safe on several goroutines at once.
type countingSource struct {
	*ByteSamples
	calls int
}

func (c *countingSource) GatherBatch(idx []int, b Batch) {
	c.calls++
	c.ByteSamples.GatherBatch(idx, b)
}

// A source that does not promise concurrent gathers is gathered in one
// call, even when it embeds one that does.
func TestGathererKeepsOtherSourcesSerial(t *testing.T) {
	by := gatherSources(t, 5)["bytes"].(*ByteSamples)
	idx := indices(40, by.Len())
	want := batchFor(by.Spec(), 40)
	by.GatherBatch(idx, want)
	cs := &countingSource{ByteSamples: by}
	for name, src := range map[string]Source{"dataset": AsSource(serialDataset{by}), "embedding": cs} {
		g := NewGatherer(src.Spec())
		g.split, g.maxParts = 0, 4
		got := batchFor(src.Spec(), 40)
		g.Gather(src, idx, got)
		g.Close()
		if !sameBatch(got, want) {
			t.Errorf("%s: the batch differs from GatherBatch's", name)
		}
	}
	if cs.calls != 1 {
		t.Errorf("the embedding source saw %d GatherBatch calls, want 1", cs.calls)
	}
}

// A bad index in any run panics in the caller with the source's message,
// after every run is done; the Gatherer goes on working.
func TestGathererPanicsInCaller(t *testing.T) {
	src := gatherSources(t, 6)["float"]
	g := NewGatherer(src.Spec())
	defer g.Close()
	g.split, g.maxParts = 0, 3
	for _, bad := range []int{0, 19, 29} { // the caller's run, a worker's, the last
		idx := indices(30, src.Len())
		idx[bad] = 100000
		msg := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			g.Gather(src, idx, batchFor(src.Spec(), 30))
			return ""
		}()
		if !strings.Contains(msg, "index 100000 outside [0, 600)") {
			t.Errorf("bad index at row %d: panic %q, want the source's", bad, msg)
		}
	}
	idx := indices(30, src.Len())
	want, got := batchFor(src.Spec(), 30), batchFor(src.Spec(), 30)
	src.GatherBatch(idx, want)
	g.Gather(src, idx, got)
	if !sameBatch(got, want) {
		t.Error("after a panic, a split batch differs from GatherBatch's")
	}
	g.Close()
	g.Close()
	g.Gather(src, idx, got) // serial after Close
	if !sameBatch(got, want) {
		t.Error("after Close, the batch differs from GatherBatch's")
	}
}

// A split gather allocates nothing once its workers run.
func TestGathererDoesNotAllocate(t *testing.T) {
	src := gatherSources(t, 64)["tokens"]
	g := NewGatherer(src.Spec())
	defer g.Close()
	g.split, g.maxParts = 0, 4
	idx := indices(64, src.Len())
	b := batchFor(src.Spec(), 64)
	g.Gather(src, idx, b)
	if n := testing.AllocsPerRun(20, func() { g.Gather(src, idx, b) }); n != 0 {
		t.Errorf("a split gather allocates %v times", n)
	}
}

// RowArrays gives the arrays GatherBatch reads: gathering by hand from them
// is GatherBatch's result, for float and byte sources.
func TestRowArraysMatchGatherBatch(t *testing.T) {
	for name, src := range gatherSources(t, 784) {
		rd, ok := src.(RowData)
		if !ok {
			continue
		}
		s, x, b, table, y := rd.RowArrays()
		if s != src {
			t.Fatalf("%s: RowArrays returns another source", name)
		}
		idx := []int{3, 0, -1, src.Len() - 1}
		want := batchFor(src.Spec(), len(idx))
		src.GatherBatch(idx, want)
		cols := src.Spec().InputSize()
		for r, i := range idx {
			for j := 0; j < cols; j++ {
				var v float32
				if i >= 0 {
					if x != nil {
						v = x[i*cols+j]
					} else {
						v = table[b[i*cols+j]]
					}
				}
				if want.X[r*cols+j] != v {
					t.Fatalf("%s: row %d col %d: GatherBatch %v, RowArrays %v", name, r, j, want.X[r*cols+j], v)
				}
			}
			if i >= 0 && want.Y[r] != y[i] {
				t.Fatalf("%s: row %d label %d, RowArrays %d", name, r, want.Y[r], y[i])
			}
		}
	}
}
