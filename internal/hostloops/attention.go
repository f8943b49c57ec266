package hostloops

// The causal softmax of attention over blocks of rows of scores, forward
// and backward. The C loops are in attention.h.

// checkRows checks the block of rows that the softmax loops work on: rows
// rows of width elements at stride ld, row i causal up to r0+i.
func checkRows(op string, n, ld, r0, rows, width int) {
	if rows <= 0 || r0 < 0 || r0+rows > width || width > ld {
		panicArgs(op, ld, r0, rows, width)
	}
	atLeast(op, (rows-1)*ld+width, n)
}

// SoftmaxCausal turns each of the rows of p (stride ld) in place into its
// causal softmax: row i holds the scores of query r0+i against keys
// 0..width-1, and becomes the softmax of its first r0+i+1 entries, then
// zeros up to width. The entries past r0+i+1 may hold anything (the
// scores a causal query does not see); they are overwritten.
func SoftmaxCausal(p []float32, ld, r0, rows, width int) {
	checkRows("SoftmaxCausal", len(p), ld, r0, rows, width)
	if !useC {
		goSoftmaxCausal(p, ld, r0, rows, width)
		return
	}
	cSoftmaxCausal(p, ld, r0, rows, width)
}

// SoftmaxCausalBackward turns the gradient at SoftmaxCausal's output p,
// held in ds (same layout), into the gradient at its input, in place:
// p·(dp - Σ p·dp) over each row's first r0+i+1 entries, zeros up to width.
func SoftmaxCausalBackward(ds, p []float32, ld, r0, rows, width int) {
	checkRows("SoftmaxCausalBackward", len(ds), ld, r0, rows, width)
	checkRows("SoftmaxCausalBackward", len(p), ld, r0, rows, width)
	if !useC {
		goSoftmaxCausalBackward(ds, p, ld, r0, rows, width)
		return
	}
	cSoftmaxCausalBackward(ds, p, ld, r0, rows, width)
}

// The Go loops: the reference for the C ones, and what runs without cgo.

// goSoftmaxCausal: row i of p (leading dimension ld) holds the scores of
// query r0+i against keys 0..width-1; it becomes the softmax of its first
// n = r0+i+1 entries followed by zeros. The exps run up to n rounded up to
// a multiple of eight (at most width), so that a row's tail runs in the C
// loop's vectors too; the entries past n are then zeroed, and the sum runs
// over that rounded length.
func goSoftmaxCausal(p []float32, ld, r0, rows, width int) {
	for i := 0; i < rows; i++ {
		n := r0 + i + 1
		row := p[i*ld : i*ld+width : i*ld+width]
		v := row[:n:n]
		m := max8(v)
		// exp over whole groups of eight where the row has room: what
		// lies past n is overwritten with zeros before the sum.
		np := min((n+7)&^7, width)
		e := row[:np:np]
		for j, s := range e {
			e[j] = exp32(s - m)
		}
		clear(row[n:])
		inv := 1 / sum8(e)
		for j := range v {
			v[j] *= inv
		}
	}
}

// goSoftmaxCausalBackward: row i of ds holds the gradient at the
// probabilities of row i of p (query r0+i); it becomes the gradient at the
// scores, p·(dp - Σ p·dp) over the first r0+i+1 entries, zeros after.
func goSoftmaxCausalBackward(ds, p []float32, ld, r0, rows, width int) {
	for i := 0; i < rows; i++ {
		n := r0 + i + 1
		row := ds[i*ld : i*ld+width : i*ld+width]
		pr := p[i*ld : i*ld+n : i*ld+n]
		g := row[:n:n]
		s := dot8(pr, g)
		for j, q := range pr {
			g[j] = q * (g[j] - s)
		}
		clear(row[n:])
	}
}
