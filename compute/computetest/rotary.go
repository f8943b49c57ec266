package computetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunRotary is the conformance suite of compute.Rotary; it skips when e has
// no Rotary.
func RunRotary(t *testing.T, e compute.Engine) {
	ro := require[compute.Rotary](t, e, "rotary embedding")
	t.Run("Reference", testRotaryReference)
	t.Run("Convention", func(t *testing.T) { testRotaryConvention(t, e, ro) })
	t.Run("ForwardBackward", func(t *testing.T) { testRotary(t, e, ro) })
	t.Run("BadSpec", func(t *testing.T) {
		for _, s := range []compute.RotarySpec{{T: 4, HeadSize: 5, Theta: 1e4}, {T: 0, HeadSize: 4, Theta: 1e4},
			{T: 4, HeadSize: 0, Theta: 1e4}, {T: 4, HeadSize: 4, Theta: 0}, {T: 4, HeadSize: 4, Theta: math.NaN()}} {
			if _, err := ro.RotaryEmbedding(s); err == nil {
				t.Errorf("RotaryEmbedding(%+v) did not fail", s)
			}
		}
	})
	t.Run("Panics", func(t *testing.T) {
		p, err := ro.RotaryEmbedding(compute.RotarySpec{T: 3, HeadSize: 4, Theta: 1e4})
		if err != nil {
			t.Fatal(err)
		}
		expectPanic(t, "rotary Forward of more heads than a row holds", func() { p.Forward(e.Alloc(2, 3, 6), 2) }, "rotary")
		expectPanic(t, "rotary Forward of no heads", func() { p.Forward(e.Alloc(2, 3, 8), 0) }, "rotary")
		expectPanic(t, "rotary Forward with rows that are not whole sequences", func() { p.Forward(e.Alloc(4, 8), 2) }, "rotary")
		expectPanic(t, "rotary Backward of more heads than a row holds", func() { p.Backward(e.Alloc(2, 3, 4), 2) }, "rotary")
	})
	t.Run("NoAllocs", func(t *testing.T) {
		p, err := ro.RotaryEmbedding(compute.RotarySpec{T: 16, HeadSize: 8, Theta: 5e5})
		if err != nil {
			t.Fatal(err)
		}
		x := tensorOf(e, randVals(rng(91), 2*16*24), 2, 16, 24)
		noAllocs(t, map[string]func(){
			"Forward":  func() { p.Forward(x, 3) },
			"Backward": func() { p.Backward(x, 2) },
		})
	})
}

// refRotary rotates x (rows of width, heads of hs, row r at position r mod
// T) in float64 by Hugging Face's rotate_half convention: channel i < hs/2
// with i+hs/2 by t·θ^(-2i/hs), the opposite way when inverse is true.
func refRotary(x []float32, width, hs, T int, theta float64, inverse bool) []float64 {
	y := make([]float64, len(x))
	half := hs / 2
	for r := 0; r < len(x)/width; r++ {
		t := float64(r % T)
		for h := 0; h < width; h += hs {
			for i := 0; i < half; i++ {
				ang := t * math.Pow(theta, -float64(2*i)/float64(hs))
				if inverse {
					ang = -ang
				}
				a, b := float64(x[r*width+h+i]), float64(x[r*width+h+i+half])
				y[r*width+h+i] = a*math.Cos(ang) - b*math.Sin(ang)
				y[r*width+h+i+half] = b*math.Cos(ang) + a*math.Sin(ang)
			}
		}
	}
	return y
}

// The inverse rotation is the rotation's gradient: it agrees with central
// differences of Σ dy·rotate(x).
func testRotaryReference(t *testing.T) {
	const width, hs, T, theta = 12, 4, 3, 100.0
	r := rng(92)
	x, dy := randVals(r, 2*T*width), randVals(r, 2*T*width)
	loss := func() float64 { return dot64(refRotary(x, width, hs, T, theta, false), dy) }
	checkReferenceFD(t, "dx", x, refRotary(dy, width, hs, T, theta, true), loss, 1e-4)
}

// The convention, by hand: with head size 4 and θ = 10000, position 1
// turns channels (0,2) by 1 radian and (1,3) by 0.01 radian; position 0
// leaves the head as it is.
func testRotaryConvention(t *testing.T, e compute.Engine, ro compute.Rotary) {
	p, err := ro.RotaryEmbedding(compute.RotarySpec{T: 2, HeadSize: 4, Theta: 10000})
	if err != nil {
		t.Fatal(err)
	}
	x := tensorOf(e, []float32{1, 2, 3, 4, 1, 0, 0, 1}, 1, 2, 4) // position 0: (1,2,3,4); 1: (1,0,0,1)
	p.Forward(x, 1)
	want := []float64{1, 2, 3, 4, math.Cos(1), -math.Sin(0.01), math.Sin(1), math.Cos(0.01)}
	checkNear(t, "rotary Forward of unit vectors", read(e, x), want, 1e-7)
}

// rotaryRows are the first width columns of each row of x (rows ld
// apart), one row after another.
func rotaryRows(x []float32, width, ld int) []float32 {
	out := make([]float32, 0, len(x)/ld*width)
	for r := 0; r < len(x)/ld; r++ {
		out = append(out, x[r*ld:r*ld+width]...)
	}
	return out
}

// withRows is x with the first width columns of each row (rows ld apart)
// replaced by y's rows of width.
func withRows(x []float32, y []float64, width, ld int) []float64 {
	out := widen(x)
	for r := 0; r < len(x)/ld; r++ {
		copy(out[r*ld:r*ld+width], y[r*width:(r+1)*width])
	}
	return out
}

func testRotary(t *testing.T, e compute.Engine, ro compute.Rotary) {
	cases := []struct {
		rows, heads, ld, hs, T int
		theta                  float64
	}{
		{1, 1, 2, 2, 1, 10000},
		{6, 1, 8, 8, 3, 10000},        // two sequences of three positions, one head
		{2 * 70, 3, 48, 16, 70, 5e5},  // three heads, Llama 3's θ
		{4 * 33, 4, 24, 6, 33, 10},    // head size 6: an odd half
		{128, 1, 64, 64, 128, 5e5},    // one sequence of a long context, one head of 64
		{2 * 70, 3, 80, 16, 70, 5e5},  // three heads of five: a packed qkv's queries and keys
		{2 * 33, 6, 64, 8, 33, 10000}, // heads of 8 in rows of 64, two left alone
		{3 * 5, 2, 14, 6, 5, 10},      // rows of an odd stride
	}
	for _, c := range cases {
		width := c.heads * c.hs
		name := fmt.Sprintf("rows %d heads %d of %d in rows of %d, T %d theta %g", c.rows, c.heads, c.hs, c.ld, c.T, c.theta)
		p, err := ro.RotaryEmbedding(compute.RotarySpec{T: c.T, HeadSize: c.hs, Theta: c.theta})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r := rng(uint64(c.rows*100 + c.ld))
		xv := randVals(r, c.rows*c.ld)
		x := tensorOf(e, xv, c.rows, c.ld)
		p.Forward(x, c.heads)
		want := withRows(xv, refRotary(rotaryRows(xv, width, c.ld), width, c.hs, c.T, c.theta, false), width, c.ld)
		// float32 angles of up to T radians: cos and sin within about T·2⁻²⁴
		tol := 1e-6 * math.Max(1, float64(c.T)/8)
		checkNear(t, "rotary Forward "+name, read(e, x), want, tol)
		dyv := randVals(r, len(xv))
		dy := tensorOf(e, dyv, c.rows, c.ld)
		p.Backward(dy, c.heads)
		wantD := withRows(dyv, refRotary(rotaryRows(dyv, width, c.ld), width, c.hs, c.T, c.theta, true), width, c.ld)
		checkNear(t, "rotary Backward "+name, read(e, dy), wantD, tol)
		// the columns past the heads are the input's, to the bit
		for i, v := range read(e, dy) {
			if i%c.ld >= width && v != dyv[i] {
				t.Fatalf("rotary Backward %s wrote column %d of a row", name, i%c.ld)
			}
		}
	}
}
