package tfmloops

import "math"

// The Go loops: the reference for the C ones, and what runs without cgo.
// Every explicit float32 conversion rounds, so the compiler may not fuse a
// multiply into the following add; the C code (kernels.h) does the same
// IEEE operations in the same order.

// Constants of exp32. Cody and Waite's split of ln 2: ln2Hi has few enough
// bits that n·ln2Hi is exact for every |n| <= 127.
const (
	expMax = 88.0 // exp32's inputs are clamped to [-expMax, expMax]
	log2e  = 1.4426950408889634
	ln2Hi  = 0.693359375
	ln2Lo  = -2.12194440054690583e-4
	magic  = 12582912.0 // 1.5·2^23: adding it rounds |v| < 2^22 to an integer
	// magicBits is math.Float32bits(magic).
	magicBits = 0x4b400000
)

// exp32 is e^x in float32 arithmetic only: x = n·ln2 + r with n an integer
// and |r| <= ln2/2, e^r by its Taylor series to r^7 (the remainder is below
// 6e-9, under a float32 ulp) evaluated in Estrin's order, times 2^n built
// from its bits. It is within a few ulps of e^x; inputs are clamped to ±88,
// so it never overflows, and it returns 0 below about -87.7 (where e^x is
// below float32's normal range). NaN gives NaN.
func exp32(x float32) float32 {
	if x > expMax {
		x = expMax
	}
	if x < -expMax {
		x = -expMax
	}
	t := float32(x*log2e) + magic // n in t's low mantissa bits
	n := t - magic
	r := x - float32(n*ln2Hi)
	r = r - float32(n*ln2Lo)
	// Estrin's scheme: the terms pair up, so the chain of dependent
	// operations is half of Horner's (the C loops run faster for it).
	r2 := float32(r * r)
	a0 := r + 1
	a1 := float32(r*(1.0/6)) + 0.5
	a2 := float32(r*(1.0/120)) + 1.0/24
	a3 := float32(r*(1.0/5040)) + 1.0/720
	b0 := float32(r2*a1) + a0
	b1 := float32(r2*a3) + a2
	r4 := float32(r2 * r2)
	p := float32(r4*b1) + b0
	ni := int32(math.Float32bits(t) - magicBits)
	return p * math.Float32frombits(uint32(ni+127)<<23)
}

// sum8 returns the sum of x in the order every reduction here uses: eight
// lanes, lane j adding the elements j, j+8, j+16, ... of the leading
// multiple of eight, combined as ((0+1)+(2+3))+((4+5)+(6+7)), then the
// remaining elements one by one. The C loops keep the eight lanes in one
// vector (or two) in the same order.
func sum8(x []float32) float32 {
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		q := x[i : i+8 : i+8]
		a0 += q[0]
		a1 += q[1]
		a2 += q[2]
		a3 += q[3]
		a4 += q[4]
		a5 += q[5]
		a6 += q[6]
		a7 += q[7]
	}
	s := ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
	for ; i < len(x); i++ {
		s += x[i]
	}
	return s
}

// rstd32 is 1/sqrt(v+eps) with IEEE's correctly rounded square root (the
// float64 square root rounded to float32 is that, exactly).
func rstd32(v, eps float32) float32 {
	return 1 / float32(math.Sqrt(float64(v+eps)))
}

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

// GELU's constants: √(2/π), 0.044715, and the factors the loops use.
const (
	geluK   = 0.7978845608028654
	geluC   = 0.044715
	geluM2K = -2 * geluK // exp's argument is -2·√(2/π)·(x+0.044715·x³)
	gelu2K  = 2 * geluK
	gelu3C  = 3 * geluC
)

// goGELU uses 0.5·(1+tanh(u)) = 1/(1+e^(-2u)): y = x·s with s that
// logistic function of 2u, u = √(2/π)·(x+0.044715·x³).
func goGELU(y, x []float32) {
	y = y[:len(x)]
	for i, v := range x {
		z := float32(v * v)
		z = float32(z * v)
		z = v + float32(geluC*z)
		e := exp32(float32(geluM2K * z))
		s := 1 / (1 + e)
		y[i] = v * s
	}
}

// goGELUBackward: gelu'(x) = s + 2·√(2/π)·x·s·(1-s)·(1+3·0.044715·x²),
// with 1-s = e·s, which keeps its precision where s is near 1.
func goGELUBackward(dx, dy, x []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	for i, v := range x {
		z := float32(v * v)
		a := float32(gelu3C*z) + 1
		z = float32(z * v)
		z = v + float32(geluC*z)
		e := exp32(float32(geluM2K * z))
		s := 1 / (1 + e)
		q := float32(s * e)
		q = float32(q * s)
		q = float32(q * v)
		q = float32(q * a)
		q = float32(gelu2K * q)
		dx[i] = dy[i] * (s + q)
	}
}

// max8 is the maximum of x (at least one element) in eight lanes like sum8:
// a lane takes v when v > its maximum.
func max8(x []float32) float32 {
	m := [8]float32{}
	for j := range m {
		m[j] = float32(math.Inf(-1))
	}
	i := 0
	for ; i+8 <= len(x); i += 8 {
		q := x[i : i+8 : i+8]
		for j := range 8 {
			if q[j] > m[j] {
				m[j] = q[j]
			}
		}
	}
	for ; i < len(x); i++ {
		if x[i] > m[0] {
			m[0] = x[i]
		}
	}
	for j := 1; j < 8; j++ {
		if m[j] > m[0] {
			m[0] = m[j]
		}
	}
	return m[0]
}

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
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		j := 0
		for ; j+8 <= n; j += 8 {
			q, d := pr[j:j+8:j+8], g[j:j+8:j+8]
			a0 += float32(q[0] * d[0])
			a1 += float32(q[1] * d[1])
			a2 += float32(q[2] * d[2])
			a3 += float32(q[3] * d[3])
			a4 += float32(q[4] * d[4])
			a5 += float32(q[5] * d[5])
			a6 += float32(q[6] * d[6])
			a7 += float32(q[7] * d[7])
		}
		s := ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
		for ; j < n; j++ {
			s += float32(pr[j] * g[j])
		}
		for j, q := range pr {
			g[j] = q * (g[j] - s)
		}
		clear(row[n:])
	}
}

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
