package hostloops

// Layer normalisation over rows, forward and backward. The C loops are in
// layernorm.h.

// LayerNorm normalises each of the rows of x (rows × c, row-major) into y:
// mean m, rstd r = 1/sqrt(var+eps) with the variance from a second pass
// over x-m, y = ((x-m)·r)·w + b; it writes mean and rstd (rows).
func LayerNorm(y, mean, rstd, x, w, b []float32, rows, c int, eps float32) {
	if rows <= 0 || c <= 0 {
		panicArgs("LayerNorm", rows, c)
	}
	atLeast("LayerNorm", rows*c, len(y), len(x))
	atLeast("LayerNorm", rows, len(mean), len(rstd))
	atLeast("LayerNorm", c, len(w), len(b))
	if !useC {
		goLayerNorm(y, mean, rstd, x, w, b, rows, c, eps)
		return
	}
	cLayerNorm(y, mean, rstd, x, w, b, rows, c, eps)
}

// LayerNormBackward takes dy (rows × c) and LayerNorm's x, w, mean, rstd,
// adds the rows' shares to dw and db (c) in row order (callers that want
// them overwritten clear them first) and sets dx (rows × c), or adds to it
// when addDX is true. dx may not be dy.
func LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd []float32, rows, c int, addDX bool) {
	if rows <= 0 || c <= 0 {
		panicArgs("LayerNormBackward", rows, c)
	}
	atLeast("LayerNormBackward", rows*c, len(dx), len(dy), len(x))
	atLeast("LayerNormBackward", rows, len(mean), len(rstd))
	atLeast("LayerNormBackward", c, len(w), len(dw), len(db))
	if !useC {
		goLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, c, addDX)
		return
	}
	cLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, c, addDX)
}

// The Go loops: the reference for the C ones, and what runs without cgo.

func goLayerNorm(y, mean, rstd, x, w, b []float32, rows, c int, eps float32) {
	w, b = w[:c:c], b[:c:c]
	fc := float32(c)
	for i := 0; i < rows; i++ {
		xr, yr := x[i*c:i*c+c:i*c+c], y[i*c:i*c+c:i*c+c]
		m := sum8(xr) / fc
		// The variance, in a second pass: sum8 of (x-m)², inlined.
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		j := 0
		for ; j+8 <= c; j += 8 {
			q := xr[j : j+8 : j+8]
			d0, d1, d2, d3 := q[0]-m, q[1]-m, q[2]-m, q[3]-m
			d4, d5, d6, d7 := q[4]-m, q[5]-m, q[6]-m, q[7]-m
			a0 += float32(d0 * d0)
			a1 += float32(d1 * d1)
			a2 += float32(d2 * d2)
			a3 += float32(d3 * d3)
			a4 += float32(d4 * d4)
			a5 += float32(d5 * d5)
			a6 += float32(d6 * d6)
			a7 += float32(d7 * d7)
		}
		s := ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
		for ; j < c; j++ {
			d := xr[j] - m
			s += float32(d * d)
		}
		rs := rstd32(s/fc, eps)
		for j, v := range xr {
			n := float32((v - m) * rs)
			yr[j] = float32(n*w[j]) + b[j]
		}
		mean[i], rstd[i] = m, rs
	}
}

// goLayerNormBackward adds each row's share to dw and db (the caller
// clears them first) and sets or adds dx.
func goLayerNormBackward(dx, dw, db, dy, x, w, mean, rstd []float32, rows, c int, addDX bool) {
	w, dw, db = w[:c:c], dw[:c:c], db[:c:c]
	fc := float32(c)
	for i := 0; i < rows; i++ {
		xr, dyr, dxr := x[i*c:i*c+c:i*c+c], dy[i*c:i*c+c:i*c+c], dx[i*c:i*c+c:i*c+c]
		m, rs := mean[i], rstd[i]
		// Σ w·dy and Σ w·dy·n over the row, in sum8's order.
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		var b0, b1, b2, b3, b4, b5, b6, b7 float32
		j := 0
		for ; j+8 <= c; j += 8 {
			q, g, wq := xr[j:j+8:j+8], dyr[j:j+8:j+8], w[j:j+8:j+8]
			g0, g1, g2, g3 := float32(wq[0]*g[0]), float32(wq[1]*g[1]), float32(wq[2]*g[2]), float32(wq[3]*g[3])
			g4, g5, g6, g7 := float32(wq[4]*g[4]), float32(wq[5]*g[5]), float32(wq[6]*g[6]), float32(wq[7]*g[7])
			a0 += g0
			a1 += g1
			a2 += g2
			a3 += g3
			a4 += g4
			a5 += g5
			a6 += g6
			a7 += g7
			b0 += float32(g0 * float32((q[0]-m)*rs))
			b1 += float32(g1 * float32((q[1]-m)*rs))
			b2 += float32(g2 * float32((q[2]-m)*rs))
			b3 += float32(g3 * float32((q[3]-m)*rs))
			b4 += float32(g4 * float32((q[4]-m)*rs))
			b5 += float32(g5 * float32((q[5]-m)*rs))
			b6 += float32(g6 * float32((q[6]-m)*rs))
			b7 += float32(g7 * float32((q[7]-m)*rs))
		}
		sg := ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
		sgn := ((b0 + b1) + (b2 + b3)) + ((b4 + b5) + (b6 + b7))
		for ; j < c; j++ {
			g := float32(w[j] * dyr[j])
			sg += g
			sgn += float32(g * float32((xr[j]-m)*rs))
		}
		mg, mgn := sg/fc, sgn/fc
		for j, v := range xr {
			n := float32((v - m) * rs)
			d := dyr[j]
			g := float32(w[j] * d)
			gx := float32((g-mg)-float32(n*mgn)) * rs
			if addDX {
				dxr[j] += gx
			} else {
				dxr[j] = gx
			}
			db[j] += d
			dw[j] += float32(n * d)
		}
	}
}
