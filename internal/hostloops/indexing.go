package hostloops

// The row gathers and scatter-adds of embeddings. The C loops are in
// indexing.h.

// checkIndexed checks the arguments of a gather or scatter over rows of c:
// it panics unless c > 0 and rows (the gathered or scattered side) holds
// len(idx) of them, and returns the first i whose idx[i] is neither -1 nor
// a row of table, or -1 when there is none.
func checkIndexed(op string, rows, table []float32, idx []int32, c int) int {
	if c <= 0 {
		panicArgs(op, c)
	}
	atLeast(op, len(idx)*c, len(rows))
	v := len(table) / c
	for i, k := range idx {
		if k < -1 || int(k) >= v {
			return i
		}
	}
	return -1
}

// GatherRows sets row i of dst (rows of c) to row idx[i] of table, or adds
// it when accumulate is true; idx[i] == -1 gives a zero row (adds nothing).
// When some idx[i] is neither -1 nor a row of table it does nothing and
// returns the first such i; otherwise it returns -1.
func GatherRows(dst, table []float32, idx []int32, c int, accumulate bool) (bad int) {
	if bad = checkIndexed("GatherRows", dst, table, idx, c); bad >= 0 || len(idx) == 0 {
		return bad
	}
	if !useC {
		goGatherRows(dst, table, idx, c, accumulate)
		return -1
	}
	cGatherRows(dst, table, idx, c, accumulate)
	return -1
}

// ScatterAddRows adds row i of src (rows of c) to row idx[i] of table, in
// the order of i; idx[i] == -1 adds nothing. When some idx[i] is neither -1
// nor a row of table it does nothing and returns the first such i;
// otherwise it returns -1. table may not overlap src.
func ScatterAddRows(table, src []float32, idx []int32, c int) (bad int) {
	if bad = checkIndexed("ScatterAddRows", src, table, idx, c); bad >= 0 || len(idx) == 0 {
		return bad
	}
	if !useC {
		goScatterAddRows(table, src, idx, c)
		return -1
	}
	cScatterAddRows(table, src, idx, c)
	return -1
}

// The Go loops: the reference for the C ones, and what runs without cgo.

func goGatherRows(dst, table []float32, idx []int32, c int, accumulate bool) {
	for i, k := range idx {
		row := dst[i*c : i*c+c : i*c+c]
		if k < 0 {
			if !accumulate {
				clear(row)
			}
			continue
		}
		src := table[int(k)*c : int(k)*c+c : int(k)*c+c]
		if !accumulate {
			copy(row, src)
			continue
		}
		for j, v := range src {
			row[j] += v
		}
	}
}

func goScatterAddRows(table, src []float32, idx []int32, c int) {
	for i, k := range idx {
		if k < 0 {
			continue
		}
		row := table[int(k)*c : int(k)*c+c : int(k)*c+c]
		for j, v := range src[i*c : i*c+c : i*c+c] {
			row[j] += v
		}
	}
}
