package computetest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunNorms is the conformance suite of compute.Norms; it skips when e has
// no Norms.
func RunNorms(t *testing.T, e compute.Engine) {
	n := require[compute.Norms](t, e, "layer norm")
	t.Run("Reference", testLayerNormReference)
	t.Run("LayerNorm", func(t *testing.T) { testLayerNorm(t, e, n) })
	t.Run("Panics", func(t *testing.T) { testLayerNormPanics(t, e, n) })
	t.Run("NoAllocs", func(t *testing.T) { testLayerNormNoAllocs(t, e, n) })
}

// refLayerNorm is LayerNorm in float64, with the two-pass variance.
func refLayerNorm(x, w, b []float32, rows, c int, eps float64) (y, mean, rstd []float64) {
	y, mean, rstd = make([]float64, rows*c), make([]float64, rows), make([]float64, rows)
	for i := 0; i < rows; i++ {
		var m, v float64
		for j := 0; j < c; j++ {
			m += float64(x[i*c+j])
		}
		m /= float64(c)
		for j := 0; j < c; j++ {
			d := float64(x[i*c+j]) - m
			v += d * d
		}
		rs := 1 / math.Sqrt(v/float64(c)+eps)
		for j := 0; j < c; j++ {
			y[i*c+j] = (float64(x[i*c+j])-m)*rs*float64(w[j]) + float64(b[j])
		}
		mean[i], rstd[i] = m, rs
	}
	return
}

// refLayerNormBackward is the gradient through the Jacobian of the
// normalisation, ∂n_j/∂x_i = rstd·(δij - 1/C - n_i·n_j/C), summed
// explicitly (O(C²) a row, unlike the engines' two sums).
func refLayerNormBackward(dy, x, w []float32, rows, c int, eps float64) (dx, dw, db []float64) {
	_, mean, rstd := refLayerNorm(x, w, make([]float32, c), rows, c, eps)
	dx, dw, db = make([]float64, rows*c), make([]float64, c), make([]float64, c)
	fc := float64(c)
	for r := 0; r < rows; r++ {
		n := make([]float64, c)
		for j := range n {
			n[j] = (float64(x[r*c+j]) - mean[r]) * rstd[r]
		}
		for i := 0; i < c; i++ {
			var s float64
			for j := 0; j < c; j++ {
				jac := -1/fc - n[i]*n[j]/fc
				if i == j {
					jac++
				}
				s += float64(dy[r*c+j]) * float64(w[j]) * rstd[r] * jac
			}
			dx[r*c+i] = s
		}
		for j := 0; j < c; j++ {
			dw[j] += float64(dy[r*c+j]) * n[j]
			db[j] += float64(dy[r*c+j])
		}
	}
	return
}

// The backward reference agrees with central differences of the forward
// reference's Σ dy·y.
func testLayerNormReference(t *testing.T) {
	const rows, c, eps = 2, 5, 1e-5
	r := rng(21)
	x, w, b, dy := randVals(r, rows*c), randVals(r, c), randVals(r, c), randVals(r, rows*c)
	loss := func(x, w, b []float32) float64 {
		y, _, _ := refLayerNorm(x, w, b, rows, c, eps)
		var s float64
		for i, v := range y {
			s += v * float64(dy[i])
		}
		return s
	}
	dx, dw, db := refLayerNormBackward(dy, x, w, rows, c, eps)
	fd := func(v []float32, i int) float64 {
		const h = 1e-3 // float32 inputs: a step that float32 holds well
		old := v[i]
		v[i] = old + h
		up := loss(x, w, b)
		v[i] = old - h
		down := loss(x, w, b)
		v[i] = old
		return (up - down) / (float64(old+h) - float64(old-h))
	}
	for i := range x {
		if g := fd(x, i); math.Abs(g-dx[i]) > 1e-4 {
			t.Errorf("reference dx[%d] = %v, finite differences %v", i, dx[i], g)
		}
	}
	for j := 0; j < c; j++ {
		if g := fd(w, j); math.Abs(g-dw[j]) > 1e-4 {
			t.Errorf("reference dw[%d] = %v, finite differences %v", j, dw[j], g)
		}
		if g := fd(b, j); math.Abs(g-db[j]) > 1e-4 {
			t.Errorf("reference db[%d] = %v, finite differences %v", j, db[j], g)
		}
	}
}

func testLayerNorm(t *testing.T, e compute.Engine, nm compute.Norms) {
	// shape is x's; its last dimension is normalised.
	for _, shape := range [][]int{{1, 1}, {3, 1}, {1, 7}, {5, 8}, {13, 33}, {4, 128}, {2, 3, 100}, {2, 65}} {
		c := shape[len(shape)-1]
		size := compute.ShapeSize("test", "LayerNorm", shape)
		rows := size / c
		r := rng(uint64(1000*rows + c))
		xv := randVals(r, size)
		for i := range xv {
			xv[i] = 3*xv[i] + 2 // not centred, not unit variance
		}
		wv, bv, dyv := randVals(r, c), randVals(r, c), randVals(r, size)
		const eps = 1e-5
		x, w, b := tensorOf(e, xv, shape...), tensorOf(e, wv, c), tensorOf(e, bv, c)
		y := tensorOf(e, nanVals(size), shape...)
		mean, rstd := tensorOf(e, nanVals(rows), rows), tensorOf(e, nanVals(rows), rows)
		nm.LayerNorm(y, mean, rstd, x, w, b, eps)
		wantY, wantM, wantR := refLayerNorm(xv, wv, bv, rows, c, eps)
		checkNear(t, "LayerNorm y", read(e, y), wantY, 1e-5)
		checkNear(t, "LayerNorm mean", read(e, mean), wantM, 1e-6)
		rs := read(e, rstd)
		for i := range rs {
			if math.Abs(float64(rs[i])-wantR[i]) > 1e-5*wantR[i] {
				t.Fatalf("LayerNorm %v: rstd[%d] = %v, want %v", shape, i, rs[i], wantR[i])
			}
		}

		wantDX, wantDW, wantDB := refLayerNormBackward(dyv, xv, wv, rows, c, eps)
		for _, add := range []bool{false, true} {
			dxv := nanVals(size)
			if add {
				dxv = randVals(r, size)
			}
			dx, dy := tensorOf(e, dxv, shape...), tensorOf(e, dyv, shape...)
			dw, db := tensorOf(e, nanVals(c), c), tensorOf(e, nanVals(c), c)
			nm.LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, add)
			want := append([]float64(nil), wantDX...)
			if add {
				for i := range want {
					want[i] += float64(dxv[i])
				}
			}
			// rstd is 1/sqrt(eps) for C = 1: the gradients are 0 there but
			// their rounding errors are not small.
			tol := 2e-5 * math.Max(1, float64(rows)/8)
			checkNear(t, "LayerNormBackward dx", read(e, dx), want, tol)
			checkNear(t, "LayerNormBackward dw", read(e, dw), wantDW, tol)
			checkNear(t, "LayerNormBackward db", read(e, db), wantDB, tol)
		}
	}
}

func testLayerNormPanics(t *testing.T, e compute.Engine, nm compute.Norms) {
	x, y := e.Alloc(4, 6), e.Alloc(4, 6)
	w, b, mean, rstd := e.Alloc(6), e.Alloc(6), e.Alloc(4), e.Alloc(4)
	expectPanic(t, "LayerNorm with w of the wrong size",
		func() { nm.LayerNorm(y, mean, rstd, x, e.Alloc(5), b, 1e-5) }, "LayerNorm")
	expectPanic(t, "LayerNorm with too few rows of stats",
		func() { nm.LayerNorm(y, e.Alloc(3), rstd, x, w, b, 1e-5) }, "LayerNorm")
	expectPanic(t, "LayerNormBackward with dx of the wrong size",
		func() { nm.LayerNormBackward(e.Alloc(4, 5), w, b, y, x, w, mean, rstd, false) }, "LayerNormBackward")
}

func testLayerNormNoAllocs(t *testing.T, e compute.Engine, nm compute.Norms) {
	const rows, c = 64, 48
	r := rng(22)
	x, y, dy := tensorOf(e, randVals(r, rows*c), rows, c), e.Alloc(rows, c), tensorOf(e, randVals(r, rows*c), rows, c)
	w, b, dw, db := tensorOf(e, randVals(r, c), c), e.Alloc(c), e.Alloc(c), e.Alloc(c)
	mean, rstd, dx := e.Alloc(rows), e.Alloc(rows), e.Alloc(rows, c)
	noAllocs(t, map[string]func(){
		"LayerNorm":         func() { nm.LayerNorm(y, mean, rstd, x, w, b, 1e-5) },
		"LayerNormBackward": func() { nm.LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd, true) },
	})
}
