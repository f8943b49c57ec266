package cpu

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/hostloops"
)

var _ compute.Indexing = (*Engine)(nil)

// checkIndexing checks a (N,C) tensor of rows against a (V,C) table and N
// indices, and returns their memory, the rows' width and the table's rows.
func checkIndexing(op string, rowsT, table compute.Tensor, idx compute.Labels) (rd, td []float32, ix []int32, c, v int) {
	rd, n, c := rowsOf(op, rowsT)
	td, v, tc := rowsOf(op, table)
	ix = labelData(op, idx)
	if tc != c {
		compute.PanicShapes("cpu", op, "the rows and the table must have the same last dimension", rowsT.Shape(), table.Shape())
	}
	if len(ix) != n {
		panic(fmt.Sprintf("cpu: %s: %d indices for %d rows of shape %v", op, len(ix), n, []int(rowsT.Shape())))
	}
	if overlap(rd, td) {
		compute.PanicShapes("cpu", op, "the rows overlap the table", rowsT.Shape(), table.Shape())
	}
	return rd, td, ix, c, v
}

// GatherRows sets each row i of dst (N,C) to row idx[i] of table (V,C), or
// adds it when accumulate is true; idx[i] == -1 gives a zero row (adds
// nothing). An index outside -1..V-1 panics, naming the row, before
// anything is written.
func (e *Engine) GatherRows(dst, table compute.Tensor, idx compute.Labels, accumulate bool) {
	const op = "GatherRows"
	dd, td, ix, c, v := checkIndexing(op, dst, table, idx)
	if i := hostloops.GatherRows(dd, td, ix, c, accumulate); i >= 0 {
		panicIndex(op, i, ix[i], v)
	}
}

// ScatterAddRows adds each row i of src (N,C) to row idx[i] of table
// (V,C), in the order of i, so that rows sharing an index sum the same way
// on every run; idx[i] == -1 adds nothing. An index outside -1..V-1 panics,
// naming the row, before anything is written.
func (e *Engine) ScatterAddRows(table, src compute.Tensor, idx compute.Labels) {
	const op = "ScatterAddRows"
	sd, td, ix, c, v := checkIndexing(op, src, table, idx)
	if i := hostloops.ScatterAddRows(td, sd, ix, c); i >= 0 {
		panicIndex(op, i, ix[i], v)
	}
}

//go:noinline
func panicIndex(op string, row int, k int32, v int) {
	panic(fmt.Sprintf("cpu: %s: row %d has index %d, want -1 or 0..%d", op, row, k, v-1))
}
