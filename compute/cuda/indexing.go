package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// Indexing is the engine's compute.Indexing (the GPT's embeddings), on a
// value of its own: its GatherRows takes a table where the engine's own
// GatherRows (compute.DeviceRows) takes resident rows. compute.Require
// finds it through the engine's OpGroups.
type Indexing struct{ e *Engine }

var (
	_ compute.Indexing    = Indexing{}
	_ compute.GroupSource = (*Engine)(nil)
)

// Indexing returns the engine's row gathers and scatters by index.
func (e *Engine) Indexing() Indexing { return Indexing{e} }

// OpGroups is the groups the engine implements on other values than
// itself: its Indexing.
func (e *Engine) OpGroups() []any { return []any{e.Indexing()} }

// check checks a (N,C) tensor of rows against a (V,C) table and N indices
// (the values SetLabels last wrote, or the pipeline's, each -1 or a row of
// the table), and returns their tensors, the rows' width and the table's
// rows.
func (x Indexing) check(op string, rowsT, table compute.Tensor, idx compute.Labels) (rd, td *Tensor, ix *Labels, c, v int) {
	e := x.e
	rd, n, c := e.rowsOf(op, rowsT)
	td, v, tc := e.rowsOf(op, table)
	ix = e.labelsOf(op, idx)
	if tc != c {
		compute.PanicShapes("cuda", op, "the rows and the table must have the same last dimension", rd.shape, td.shape)
	}
	if len(ix.host) != n {
		panic(fmt.Sprintf("cuda: %s: %d indices for %d rows of shape %v", op, len(ix.host), n, []int(rd.shape)))
	}
	if overlap(rd, td) {
		compute.PanicShapes("cuda", op, "the rows overlap the table", rd.shape, td.shape)
	}
	for i, k := range ix.host {
		if k < -1 || int(k) >= v {
			panicIndex(op, i, k, v)
		}
	}
	return rd, td, ix, c, v
}

// GatherRows sets each row i of dst (N,C) to row idx[i] of table (V,C), or
// adds it when accumulate is true; idx[i] == -1 gives a zero row (adds
// nothing). One kernel (sdc_index_gather), a block a row. An index outside
// -1..V-1 panics, naming the row, before anything is enqueued.
func (x Indexing) GatherRows(dst, table compute.Tensor, idx compute.Labels, accumulate bool) {
	const op = "GatherRows"
	dd, td, ix, c, v := x.check(op, dst, table, idx)
	x.e.fail(op, x.e.dev.IndexGather(dd.ptr, td.ptr, ix.ptr, dd.size/c, c, v, accumulate))
}

// ScatterAddRows adds each row i of src (N,C) to row idx[i] of table
// (V,C); every element of the table adds its rows in order of i, as the
// CPU engine does (sdc_index_scatter_add: no atomics), so the sums have
// the same bits on every run and on both engines. idx[i] == -1 adds
// nothing; an index outside -1..V-1 panics, naming the row.
func (x Indexing) ScatterAddRows(table, src compute.Tensor, idx compute.Labels) {
	const op = "ScatterAddRows"
	sd, td, ix, c, v := x.check(op, src, table, idx)
	x.e.fail(op, x.e.dev.IndexScatterAdd(td.ptr, sd.ptr, ix.ptr, sd.size/c, c, v))
}

//go:noinline
func panicIndex(op string, row int, k int32, v int) {
	panic(fmt.Sprintf("cuda: %s: row %d has index %d, want -1 or 0..%d", op, row, k, v-1))
}
