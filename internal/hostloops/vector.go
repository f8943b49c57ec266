package hostloops

// The element-wise folds of the gradients and the CPU backends' reductions,
// the finite check, and the sum of squares of gradient clipping's norm (Go
// only: float64 sums). The C loops are in vector.h.

// Sum2 sets dst[i] = a[i] + b[i].
func Sum2(dst, a, b []float32) {
	n := len(dst)
	atLeast("Sum2", n, len(a), len(b))
	if !useC || n < minC {
		goSum2(dst, a[:n], b[:n])
		return
	}
	cSum2(dst, a, b)
}

// Acc1 sets dst[i] += a[i].
func Acc1(dst, a []float32) {
	n := len(dst)
	atLeast("Acc1", n, len(a))
	if !useC || n < minC {
		goAcc1(dst, a[:n])
		return
	}
	cAcc1(dst, a)
}

// Acc2 sets dst[i] = (dst[i] + a[i]) + b[i].
func Acc2(dst, a, b []float32) {
	n := len(dst)
	atLeast("Acc2", n, len(a), len(b))
	if !useC || n < minC {
		goAcc2(dst, a[:n], b[:n])
		return
	}
	cAcc2(dst, a, b)
}

// Scale sets x[i] *= s.
func Scale(x []float32, s float32) {
	if !useC || len(x) < minC {
		goScale(x, s)
		return
	}
	cScale(x, s)
}

// AllFinite reports whether no element of x is NaN or ±Inf.
func AllFinite(x []float32) bool {
	if !useC || len(x) < minC {
		return goAllFinite(x)
	}
	return cAllFinite(x)
}

// SumSquares returns the sum of the squares of x's elements, accumulated in
// float64 in index order.
func SumSquares(x []float32) float64 {
	var sum float64
	for _, v := range x {
		sum += float64(v) * float64(v)
	}
	return sum
}

// The Go loops: the reference for the C ones, and what runs without cgo.
// The fold loops are unrolled eight wide over re-sliced windows so that the
// compiler drops the bounds checks.

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
