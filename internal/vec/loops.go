package vec

import "math"

// The Go loops: the reference for the C ones, and what runs without cgo.
// The fold loops are unrolled eight wide over re-sliced windows so that the
// compiler drops the bounds checks. Every explicit float32 conversion
// rounds, so the compiler may not fuse a multiply into the following add.

func goSum2(dst, a, b []float32) {
	n := len(dst)
	dst, a, b = dst[:n:n], a[:n:n], b[:n:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		d, x, y := dst[i:i+8:i+8], a[i:i+8:i+8], b[i:i+8:i+8]
		d[0] = x[0] + y[0]
		d[1] = x[1] + y[1]
		d[2] = x[2] + y[2]
		d[3] = x[3] + y[3]
		d[4] = x[4] + y[4]
		d[5] = x[5] + y[5]
		d[6] = x[6] + y[6]
		d[7] = x[7] + y[7]
	}
	for ; i < n; i++ {
		dst[i] = a[i] + b[i]
	}
}

func goAcc1(dst, a []float32) {
	n := len(dst)
	dst, a = dst[:n:n], a[:n:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		d, x := dst[i:i+8:i+8], a[i:i+8:i+8]
		d[0] += x[0]
		d[1] += x[1]
		d[2] += x[2]
		d[3] += x[3]
		d[4] += x[4]
		d[5] += x[5]
		d[6] += x[6]
		d[7] += x[7]
	}
	for ; i < n; i++ {
		dst[i] += a[i]
	}
}

func goAcc2(dst, a, b []float32) {
	n := len(dst)
	dst, a, b = dst[:n:n], a[:n:n], b[:n:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		d, x, y := dst[i:i+8:i+8], a[i:i+8:i+8], b[i:i+8:i+8]
		d[0] = (d[0] + x[0]) + y[0]
		d[1] = (d[1] + x[1]) + y[1]
		d[2] = (d[2] + x[2]) + y[2]
		d[3] = (d[3] + x[3]) + y[3]
		d[4] = (d[4] + x[4]) + y[4]
		d[5] = (d[5] + x[5]) + y[5]
		d[6] = (d[6] + x[6]) + y[6]
		d[7] = (d[7] + x[7]) + y[7]
	}
	for ; i < n; i++ {
		dst[i] = (dst[i] + a[i]) + b[i]
	}
}

func goScale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// goAllFinite: x-x is 0 for finite x and NaN otherwise, so sums tell; four
// independent sums keep the loop from waiting on one chain of additions.
func goAllFinite(s []float32) bool {
	var a0, a1, a2, a3 float32
	i := 0
	for ; i+4 <= len(s); i += 4 {
		q := s[i : i+4 : i+4]
		a0 += q[0] - q[0]
		a1 += q[1] - q[1]
		a2 += q[2] - q[2]
		a3 += q[3] - q[3]
	}
	for ; i < len(s); i++ {
		a0 += s[i] - s[i]
	}
	return (a0+a1)+(a2+a3) == 0
}

// goReLUMask works without branches: where y is half zeros in no pattern, a
// branch is mispredicted every other element, which made this loop 3x
// slower. y <= 0 holds exactly when y is ±0 or negative and not NaN: with a
// = |bits(y)|, keep = (a != 0 && sign == 0) || a > bits(+Inf).
func goReLUMask(dd, yd []float32) {
	yd = yd[:len(dd)]
	for i, v := range yd {
		ub := math.Float32bits(v)
		a := int64(ub & 0x7fffffff)
		nonZero := uint32((a-1)>>63) + 1      // a-1 < 0 only for a == 0
		nan := uint32((0x7f800000-a)>>63) & 1 // a > bits(+Inf)
		keep := nonZero&(ub>>31^1) | nan
		dd[i] = math.Float32frombits(math.Float32bits(dd[i]) & -keep)
	}
}

func goBiasAct(y, bias []float32, rows, n int, relu bool) {
	for i := 0; i < rows; i++ {
		row := y[i*n : i*n+n]
		switch {
		case bias != nil && relu:
			bd := bias[:len(row)]
			for j, v := range row {
				row[j] = max(v+bd[j], 0)
			}
		case bias != nil:
			bd := bias[:len(row)]
			for j := range row {
				row[j] += bd[j]
			}
		case relu:
			for j, v := range row {
				row[j] = max(v, 0)
			}
		}
	}
}

func goColSums(s, d []float32, rows, n int) {
	s = s[:n]
	for i := 0; i < rows; i++ {
		row := d[i*n : i*n+n]
		for j, v := range row {
			s[j] += v
		}
	}
}

func goSGD(p, g []float32, lr, wd float32) {
	g = g[:len(p)]
	for i, pi := range p {
		gi := g[i]
		if wd != 0 {
			gi += float32(wd * pi)
		}
		p[i] = pi - float32(lr*gi)
	}
}

func goSGDMomentum(p, g, buf []float32, lr, wd, mu float32, nesterov, first bool) {
	g, buf = g[:len(p)], buf[:len(p)]
	for i, pi := range p {
		gi := g[i]
		if wd != 0 {
			gi += float32(wd * pi)
		}
		b := gi
		if !first {
			b = float32(mu*buf[i]) + gi
		}
		buf[i] = b
		d := b
		if nesterov {
			d = gi + float32(mu*b)
		}
		p[i] = pi - float32(lr*d)
	}
}

func goAdam(p, g, m, v []float32, a *AdamArgs) {
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	b1, b2, c1, c2, eps := a.Beta1, a.Beta2, a.C1, a.C2, a.Eps
	decay, l2, stepSize, bc2 := a.Decay, a.L2, a.StepSize, a.BC2Sqrt
	for i, pi := range p {
		pi = float32(pi * decay)
		gi := g[i]
		if l2 != 0 {
			gi += float32(l2 * pi)
		}
		mi := float32(b1*m[i]) + float32(c1*gi)
		vi := float32(b2*v[i]) + float32(float32(c2*gi)*gi)
		m[i], v[i] = mi, vi
		den := float32(math.Sqrt(float64(vi)))/bc2 + eps
		p[i] = pi - float32(stepSize*mi)/den
	}
}
