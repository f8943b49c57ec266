package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

var _ compute.Indexing = (*Engine)(nil)

// check checks a (N,C) tensor of rows against a (V,C) table and N indices
// (the values SetLabels last wrote, or the pipeline's, each -1 or a row of
// the table), and returns their tensors, the rows' width and the table's
// rows.
func (e *Engine) indexCheck(op string, rowsT, table compute.Tensor, idx compute.Labels) (rd, td *Tensor, ix *Labels, c, v int) {
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
func (e *Engine) GatherRows(dst, table compute.Tensor, idx compute.Labels, accumulate bool) {
	const op = "GatherRows"
	dd, td, ix, c, v := e.indexCheck(op, dst, table, idx)
	e.fail(op, e.dev.IndexGather(dd.ptr, td.ptr, ix.ptr, dd.size/c, c, v, accumulate))
}

// ScatterAddRows adds each row i of src (N,C) to row idx[i] of table
// (V,C); every element of the table adds its rows in order of i, as the
// CPU engine does (sdc_index_scatter_add: no atomics), so the sums have
// the same bits on every run and on both engines. idx[i] == -1 adds
// nothing; an index outside -1..V-1 panics, naming the row.
func (e *Engine) ScatterAddRows(table, src compute.Tensor, idx compute.Labels) {
	const op = "ScatterAddRows"
	sd, td, ix, c, v := e.indexCheck(op, src, table, idx)
	e.fail(op, e.dev.IndexScatterAdd(td.ptr, sd.ptr, ix.ptr, sd.size/c, c, v))
}

//go:noinline
func panicIndex(op string, row int, k int32, v int) {
	panic(fmt.Sprintf("cuda: %s: row %d has index %d, want -1 or 0..%d", op, row, k, v-1))
}
