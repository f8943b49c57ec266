package cpu

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/vec"
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
// nothing). An index outside -1..V-1 panics, naming the row.
func (e *Engine) GatherRows(dst, table compute.Tensor, idx compute.Labels, accumulate bool) {
	const op = "GatherRows"
	dd, td, ix, c, v := checkIndexing(op, dst, table, idx)
	for i, k := range ix {
		row := dd[i*c : i*c+c]
		if k == -1 {
			if !accumulate {
				clear(row)
			}
			continue
		}
		if k < 0 || int(k) >= v {
			compute.PanicLabel("cpu", op, i, int(k), v)
		}
		src := td[int(k)*c : int(k)*c+c]
		if accumulate {
			vec.Acc1(row, src)
		} else {
			copy(row, src)
		}
	}
}

// ScatterAddRows adds each row i of src (N,C) to row idx[i] of table
// (V,C), in the order of i, so that rows sharing an index sum the same way
// on every run; idx[i] == -1 adds nothing. An index outside -1..V-1 panics,
// naming the row.
func (e *Engine) ScatterAddRows(table, src compute.Tensor, idx compute.Labels) {
	const op = "ScatterAddRows"
	sd, td, ix, c, v := checkIndexing(op, src, table, idx)
	for i, k := range ix {
		if k == -1 {
			continue
		}
		if k < 0 || int(k) >= v {
			compute.PanicLabel("cpu", op, i, int(k), v)
		}
		vec.Acc1(td[int(k)*c:int(k)*c+c], sd[i*c:i*c+c])
	}
}
