package shm

// The reduction's inner loops over one chunk. Each is unrolled eight wide
// over re-sliced windows so that the compiler drops the bounds checks; the
// order of the float32 additions is always ((x0 + x1) + x2) + ... per element.
// Every input is at least len(dst) long.

// sum2 sets dst[i] = a[i] + b[i].
func sum2(dst, a, b []float32) {
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

// acc1 sets dst[i] += a[i].
func acc1(dst, a []float32) {
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

// acc2 sets dst[i] = (dst[i] + a[i]) + b[i].
func acc2(dst, a, b []float32) {
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

// divide sets dst[i] /= d.
func divide(dst []float32, d float32) {
	for i := range dst {
		dst[i] /= d
	}
}

// maxTo sets dst[i] = max(dst[i], a[i]).
func maxTo(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = max(dst[i], a[i])
	}
}

// minTo sets dst[i] = min(dst[i], a[i]).
func minTo(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = min(dst[i], a[i])
	}
}
