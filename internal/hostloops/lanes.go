package hostloops

import "math"

// The arithmetic that the row loops share, in the order that their C
// versions (lanes.h) keep: e^x in float32 alone, and sums and maxima in
// eight fixed lanes. Every explicit float32 conversion rounds, so the
// compiler may not fuse a multiply into the following add.

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

// dot8 returns Σ a[i]·b[i] over a (b at least as long) in sum8's order,
// each product rounded to float32 before it is added.
func dot8(a, b []float32) float32 {
	b = b[:len(a):len(a)]
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		p, q := a[i:i+8:i+8], b[i:i+8:i+8]
		a0 += float32(p[0] * q[0])
		a1 += float32(p[1] * q[1])
		a2 += float32(p[2] * q[2])
		a3 += float32(p[3] * q[3])
		a4 += float32(p[4] * q[4])
		a5 += float32(p[5] * q[5])
		a6 += float32(p[6] * q[6])
		a7 += float32(p[7] * q[7])
	}
	s := ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
	for ; i < len(a); i++ {
		s += float32(a[i] * b[i])
	}
	return s
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
