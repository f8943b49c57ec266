package computetest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunIndexing is the conformance suite of compute.Indexing; it skips when e
// has no Indexing.
func RunIndexing(t *testing.T, e compute.Engine) {
	ix := require[compute.Indexing](t, e, "embedding lookup")
	t.Run("Gather", func(t *testing.T) { testGather(t, e, ix) })
	t.Run("ScatterAdd", func(t *testing.T) { testScatterAdd(t, e, ix) })
	t.Run("BadIndex", func(t *testing.T) { testBadIndex(t, e, ix) })
	t.Run("NoAllocs", func(t *testing.T) {
		table, rows := e.Alloc(11, 70), e.Alloc(4, 70)
		idx := e.AllocLabels(4)
		e.SetLabels(idx, []int32{3, -1, 10, 3})
		noAllocs(t, map[string]func(){
			"GatherRows":           func() { ix.GatherRows(rows, table, idx, false) },
			"GatherRowsAccumulate": func() { ix.GatherRows(rows, table, idx, true) },
			"ScatterAddRows":       func() { ix.ScatterAddRows(table, rows, idx) },
		})
	})
}

// indexCases: a width below and one above the length where engines switch
// to vector loops, and indices with repeats, padding and the last row.
var indexIdx = []int32{3, -1, 0, 10, 3, 7, -1, 3, 10}

func bitsOf(got, want []float32) int {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	return -1
}

func testGather(t *testing.T, e compute.Engine, ix compute.Indexing) {
	const v = 11
	for _, c := range []int{1, 5, 70} {
		n := len(indexIdx)
		r := rng(uint64(40 + c))
		tv, init := randVals(r, v*c), randVals(r, n*c)
		table := tensorOf(e, tv, v, c)
		idx := e.AllocLabels(n)
		e.SetLabels(idx, indexIdx)
		for _, acc := range []bool{false, true} {
			start := nanVals(n * c)
			if acc {
				start = init
			}
			dst := tensorOf(e, start, 3, 3, c) // (N,C) as (3,3,C): rows of the last dimension
			ix.GatherRows(dst, table, idx, acc)
			want := make([]float32, n*c)
			for i, k := range indexIdx {
				for j := 0; j < c; j++ {
					var w float32
					if k >= 0 {
						w = tv[int(k)*c+j]
					}
					if acc {
						w = init[i*c+j] + w
						if k < 0 {
							w = init[i*c+j]
						}
					}
					want[i*c+j] = w
				}
			}
			if i := bitsOf(read(e, dst), want); i >= 0 {
				t.Fatalf("GatherRows(C=%d, accumulate=%v): element %d (row %d, index %d) = %v, want %v",
					c, acc, i, i/c, indexIdx[i/c], read(e, dst)[i], want[i])
			}
		}
	}
}

func testScatterAdd(t *testing.T, e compute.Engine, ix compute.Indexing) {
	const v = 11
	for _, c := range []int{1, 5, 70} {
		n := len(indexIdx)
		r := rng(uint64(50 + c))
		tv, sv := randVals(r, v*c), randVals(r, n*c)
		table, src := tensorOf(e, tv, v, c), tensorOf(e, sv, n, c)
		idx := e.AllocLabels(n)
		e.SetLabels(idx, indexIdx)
		ix.ScatterAddRows(table, src, idx)
		// Row order: table[k] = ((table[k] + src[i1]) + src[i2]) + ...
		want := append([]float32(nil), tv...)
		for i, k := range indexIdx {
			if k < 0 {
				continue
			}
			for j := 0; j < c; j++ {
				want[int(k)*c+j] += sv[i*c+j]
			}
		}
		if i := bitsOf(read(e, table), want); i >= 0 {
			t.Fatalf("ScatterAddRows(C=%d): table element %d (row %d) = %v, want %v (sums in row order)",
				c, i, i/c, read(e, table)[i], want[i])
		}
	}
}

func testBadIndex(t *testing.T, e compute.Engine, ix compute.Indexing) {
	table, rows := e.Alloc(4, 3), e.Alloc(2, 3)
	idx := e.AllocLabels(2)
	for _, bad := range []int32{4, -2} {
		e.SetLabels(idx, []int32{0, bad})
		expectPanic(t, "GatherRows with an index out of range", func() { ix.GatherRows(rows, table, idx, false) }, "row 1")
		expectPanic(t, "ScatterAddRows with an index out of range", func() { ix.ScatterAddRows(table, rows, idx) }, "row 1")
	}
	expectPanic(t, "GatherRows with rows of another width", func() { ix.GatherRows(e.Alloc(2, 4), table, idx, false) }, "GatherRows")
	expectPanic(t, "GatherRows with too few indices", func() { ix.GatherRows(e.Alloc(3, 3), table, idx, false) }, "GatherRows")
}
