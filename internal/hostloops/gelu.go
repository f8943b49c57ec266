package hostloops

// The GELU activation (tanh approximation), forward and backward. The C
// loops are in gelu.h.

// GELU sets y[i] = gelu(x[i]) for every i of x, in the tanh approximation
// written as x/(1+e^(-2u)), u = √(2/π)·(x+0.044715·x³). y may not be x.
func GELU(y, x []float32) {
	atLeast("GELU", len(x), len(y))
	if !useC || len(x) == 0 {
		goGELU(y, x)
		return
	}
	cGELU(y, x)
}

// GELUBackward sets dx[i] = dy[i]·gelu'(x[i]) for every i of x; dx may be
// dy.
func GELUBackward(dx, dy, x []float32) {
	atLeast("GELUBackward", len(x), len(dx), len(dy))
	if !useC || len(x) == 0 {
		goGELUBackward(dx, dy, x)
		return
	}
	cGELUBackward(dx, dy, x)
}

// The Go loops: the reference for the C ones, and what runs without cgo.

// GELU's constants: √(2/π), 0.044715, and the factors the loops use.
const (
	geluK   = 0.7978845608028654
	geluC   = 0.044715
	geluM2K = -2 * geluK // exp's argument is -2·√(2/π)·(x+0.044715·x³)
	gelu2K  = 2 * geluK
	gelu3C  = 3 * geluC
)

// geluExpArg is the argument -2u of e^(-2u), u = √(2/π)·(v+0.044715·v³),
// in GELU's tanh approximation: 0.5·(1+tanh(u)) = 1/(1+e^(-2u)), the gate
// s that gives gelu(v) = v·s.
func geluExpArg(v float32) float32 {
	z := float32(v * v)
	z = float32(z * v)
	z = v + float32(geluC*z)
	return float32(geluM2K * z)
}

func goGELU(y, x []float32) {
	y = y[:len(x)]
	for i, v := range x {
		e := exp32(geluExpArg(v))
		s := 1 / (1 + e)
		y[i] = v * s
	}
}

// goGELUBackward: gelu'(x) = s + 2·√(2/π)·x·s·(1-s)·(1+3·0.044715·x²),
// with 1-s = e·s, which keeps its precision where s is near 1.
func goGELUBackward(dx, dy, x []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	for i, v := range x {
		a := float32(gelu3C*float32(v*v)) + 1
		e := exp32(geluExpArg(v))
		s := 1 / (1 + e)
		q := float32(s * e)
		q = float32(q * s)
		q = float32(q * v)
		q = float32(q * a)
		q = float32(gelu2K * q)
		dx[i] = dy[i] * (s + q)
	}
}
