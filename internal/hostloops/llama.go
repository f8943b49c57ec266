package hostloops

// The loops of a Llama block: RMSNorm, SwiGLU's elementwise part and the
// rotary embedding, each with a C twin (rmsnorm.h, swiglu.h, rotary.h).
// They follow the package's rules (explicit float32 rounding, sums in
// sum8's lanes, exp32: lanes.go), so that the C versions give the same
// bits.

// RMSNorm normalises each of the rows of x (rows × c, row-major) into y:
// r = 1/sqrt(Σx²/c + eps), y = (x·r)·w; it writes rstd (rows). y may not
// be x.
func RMSNorm(y, rstd, x, w []float32, rows, c int, eps float32) {
	if rows <= 0 || c <= 0 {
		panicArgs("RMSNorm", rows, c)
	}
	atLeast("RMSNorm", rows*c, len(y), len(x))
	atLeast("RMSNorm", rows, len(rstd))
	atLeast("RMSNorm", c, len(w))
	if !useC {
		goRMSNorm(y, rstd, x, w, rows, c, eps)
		return
	}
	cRMSNorm(y, rstd, x, w, rows, c, eps)
}

// goRMSNorm is RMSNorm's Go loop: the reference for the C one.
func goRMSNorm(y, rstd, x, w []float32, rows, c int, eps float32) {
	w = w[:c:c]
	fc := float32(c)
	for i := 0; i < rows; i++ {
		xr, yr := x[i*c:i*c+c:i*c+c], y[i*c:i*c+c:i*c+c]
		rs := rstd32(dot8(xr, xr)/fc, eps)
		for j, v := range xr {
			yr[j] = float32(float32(v*rs) * w[j])
		}
		rstd[i] = rs
	}
}

// RMSNormBackward takes dy (rows × c) and RMSNorm's x, w and rstd, adds
// the rows' shares dy·n (n = x·rstd) to dw (c) in row order (callers that
// want it overwritten clear it first) and sets dx (rows × c), or adds to it
// when addDX is true: with g = w·dy, dx = (g - n·Σ(g·n)/c)·rstd. dx may
// not be dy.
func RMSNormBackward(dx, dw, dy, x, w, rstd []float32, rows, c int, addDX bool) {
	if rows <= 0 || c <= 0 {
		panicArgs("RMSNormBackward", rows, c)
	}
	atLeast("RMSNormBackward", rows*c, len(dx), len(dy), len(x))
	atLeast("RMSNormBackward", rows, len(rstd))
	atLeast("RMSNormBackward", c, len(w), len(dw))
	if !useC {
		goRMSNormBackward(dx, dw, dy, x, w, rstd, rows, c, addDX)
		return
	}
	cRMSNormBackward(dx, dw, dy, x, w, rstd, rows, c, addDX)
}

// goRMSNormBackward is RMSNormBackward's Go loop: the reference for the C
// one.
func goRMSNormBackward(dx, dw, dy, x, w, rstd []float32, rows, c int, addDX bool) {
	w, dw = w[:c:c], dw[:c:c]
	fc := float32(c)
	for i := 0; i < rows; i++ {
		xr, dyr, dxr := x[i*c:i*c+c:i*c+c], dy[i*c:i*c+c:i*c+c], dx[i*c:i*c+c:i*c+c]
		rs := rstd[i]
		// Σ g·n over the row, in sum8's order.
		var a [8]float32
		j := 0
		for ; j+8 <= c; j += 8 {
			for l := range 8 {
				g := float32(w[j+l] * dyr[j+l])
				a[l] += float32(g * float32(xr[j+l]*rs))
			}
		}
		s := ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
		for ; j < c; j++ {
			g := float32(w[j] * dyr[j])
			s += float32(g * float32(xr[j]*rs))
		}
		m := s / fc
		for j, v := range xr {
			n := float32(v * rs)
			d := dyr[j]
			g := float32(w[j] * d)
			gx := float32(g-float32(n*m)) * rs
			if addDX {
				dxr[j] += gx
			} else {
				dxr[j] = gx
			}
			dw[j] += float32(n * d)
		}
	}
}

// SwiGLU sets y (rows × f) to silu(a)·b element by element from ab (rows
// × 2f), each row of ab [a | b] (gate_proj's and up_proj's outputs side by
// side, as their joined GEMM writes them); silu(a) = a·σ(a) with σ(a) =
// 1/(1+e^-a). y may not overlap ab.
func SwiGLU(y, ab []float32, rows, f int) {
	if rows <= 0 || f <= 0 {
		panicArgs("SwiGLU", rows, f)
	}
	atLeast("SwiGLU", rows*f, len(y))
	atLeast("SwiGLU", 2*rows*f, len(ab))
	if !useC {
		goSwiGLU(y, ab, rows, f)
		return
	}
	cSwiGLU(y, ab, rows, f)
}

// goSwiGLU is SwiGLU's Go loop: the reference for the C one.
func goSwiGLU(y, ab []float32, rows, f int) {
	for r := range rows {
		a, b, yr := ab[2*r*f:2*r*f+f:2*r*f+f], ab[2*r*f+f:2*r*f+2*f:2*r*f+2*f], y[r*f:r*f+f:r*f+f]
		for i, v := range a {
			s := 1 / (1 + exp32(-v))
			yr[i] = float32(v*s) * b[i]
		}
	}
}

// SwiGLUBackward writes dab (rows × 2f), each row [da | db], from dy (rows
// × f), the gradient at SwiGLU's output, and its input ab: da =
// dy·b·silu'(a) and db = dy·silu(a), with silu'(a) = σ + a·σ·(1-σ) and 1-σ
// computed as e^-a·σ (precise where σ is near 1). dab may not overlap dy
// or ab.
func SwiGLUBackward(dab, dy, ab []float32, rows, f int) {
	if rows <= 0 || f <= 0 {
		panicArgs("SwiGLUBackward", rows, f)
	}
	atLeast("SwiGLUBackward", rows*f, len(dy))
	atLeast("SwiGLUBackward", 2*rows*f, len(dab), len(ab))
	if !useC {
		goSwiGLUBackward(dab, dy, ab, rows, f)
		return
	}
	cSwiGLUBackward(dab, dy, ab, rows, f)
}

// goSwiGLUBackward is SwiGLUBackward's Go loop: the reference for the C
// one.
func goSwiGLUBackward(dab, dy, ab []float32, rows, f int) {
	for r := range rows {
		o := 2 * r * f
		a, b := ab[o:o+f:o+f], ab[o+f:o+2*f:o+2*f]
		da, db, d := dab[o:o+f:o+f], dab[o+f:o+2*f:o+2*f], dy[r*f:r*f+f:r*f+f]
		for i, v := range a {
			e := exp32(-v)
			s := 1 / (1 + e)
			db[i] = float32(float32(v*s) * d[i])
			q := float32(e * s)
			q = float32(q * s)
			q = float32(q * v)
			da[i] = float32(d[i]*b[i]) * (s + q)
		}
	}
}

// Rotate turns the heads of x (rows of width channels at a stride of ld
// elements, ld >= width, heads of hs channels side by side, hs even) into
// the same places of y, row r at position r mod t: channel i < hs/2 of a
// head with channel i+hs/2 by the angle whose cosine and sine are
// cos[p·hs/2+i] and sin[p·hs/2+i] at position p,
//
//	y[i]      = x[i]·cos - x[i+hs/2]·sin
//	y[i+hs/2] = x[i+hs/2]·cos + x[i]·sin
//
// or by the opposite angle when inverse is true (the gradient). The
// columns of a row past width are not touched. y may be x.
func Rotate(y, x, cos, sin []float32, rows, width, ld, hs, t int, inverse bool) {
	if rows <= 0 || width <= 0 || ld < width || hs <= 0 || hs%2 != 0 || width%hs != 0 || t <= 0 {
		panicArgs("Rotate", rows, width, ld, hs, t)
	}
	half := hs / 2
	atLeast("Rotate", (rows-1)*ld+width, len(y), len(x))
	atLeast("Rotate", t*half, len(cos), len(sin))
	if !useC {
		goRotate(y, x, cos, sin, rows, width, ld, hs, t, inverse)
		return
	}
	cRotate(y, x, cos, sin, rows, width, ld, hs, t, inverse)
}

// goRotate is Rotate's Go loop: the reference for the C one.
func goRotate(y, x, cos, sin []float32, rows, width, ld, hs, t int, inverse bool) {
	half := hs / 2
	for r := 0; r < rows; r++ {
		p := r % t
		c, s := cos[p*half:p*half+half:p*half+half], sin[p*half:p*half+half:p*half+half]
		o := r * ld
		xr, yr := x[o:o+width:o+width], y[o:o+width:o+width]
		for h := 0; h < width; h += hs {
			x0, x1 := xr[h:h+half:h+half], xr[h+half:h+hs:h+hs]
			y0, y1 := yr[h:h+half:h+half], yr[h+half:h+hs:h+hs]
			for i := range half {
				a, b := x0[i], x1[i]
				ci, si := c[i], s[i]
				if inverse {
					si = -si
				}
				y0[i] = float32(a*ci) - float32(b*si)
				y1[i] = float32(b*ci) + float32(a*si)
			}
		}
	}
}
