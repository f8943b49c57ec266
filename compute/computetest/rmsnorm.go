package computetest

import (
	"math"
	"testing"

	"github.com/symddp/symddp/compute"
)

// RunRMSNorm is the conformance suite of compute.RMSNorms; it skips when e
// has no RMSNorms.
func RunRMSNorm(t *testing.T, e compute.Engine) {
	n := require[compute.RMSNorms](t, e, "RMSNorm")
	t.Run("Reference", testRMSNormReference)
	t.Run("RMSNorm", func(t *testing.T) { testRMSNorm(t, e, n) })
	t.Run("Panics", func(t *testing.T) {
		x, y, w, rstd := e.Alloc(4, 6), e.Alloc(4, 6), e.Alloc(6), e.Alloc(4)
		expectPanic(t, "RMSNorm with w of the wrong size", func() { n.RMSNorm(y, rstd, x, e.Alloc(5), 1e-5) }, "RMSNorm")
		expectPanic(t, "RMSNorm with too few rows of rstd", func() { n.RMSNorm(y, e.Alloc(3), x, w, 1e-5) }, "RMSNorm")
		expectPanic(t, "RMSNorm in place", func() { n.RMSNorm(x, rstd, x, w, 1e-5) }, "RMSNorm")
		expectPanic(t, "RMSNormBackward with dx of the wrong size",
			func() { n.RMSNormBackward(e.Alloc(4, 5), e.Alloc(6), y, x, w, rstd, false) }, "RMSNormBackward")
	})
	t.Run("NoAllocs", func(t *testing.T) {
		const rows, c = 64, 48
		r := rng(72)
		x, y, dy := tensorOf(e, randVals(r, rows*c), rows, c), e.Alloc(rows, c), tensorOf(e, randVals(r, rows*c), rows, c)
		w, dw, rstd, dx := tensorOf(e, randVals(r, c), c), e.Alloc(c), e.Alloc(rows), e.Alloc(rows, c)
		noAllocs(t, map[string]func(){
			"RMSNorm":         func() { n.RMSNorm(y, rstd, x, w, 1e-5) },
			"RMSNormBackward": func() { n.RMSNormBackward(dx, dw, dy, x, w, rstd, true) },
		})
	})
}

// refRMSNorm is RMSNorm in float64.
func refRMSNorm(x, w []float32, rows, c int, eps float64) (y, rstd []float64) {
	y, rstd = make([]float64, rows*c), make([]float64, rows)
	for i := 0; i < rows; i++ {
		var ss float64
		for j := 0; j < c; j++ {
			ss += float64(x[i*c+j]) * float64(x[i*c+j])
		}
		rs := 1 / math.Sqrt(ss/float64(c)+eps)
		for j := 0; j < c; j++ {
			y[i*c+j] = float64(x[i*c+j]) * rs * float64(w[j])
		}
		rstd[i] = rs
	}
	return y, rstd
}

// refRMSNormBackward is the gradient through the Jacobian of the
// normalisation, ∂n_j/∂x_i = rstd·(δij - n_i·n_j/C), summed explicitly
// (O(C²) a row, unlike the engines' one sum).
func refRMSNormBackward(dy, x, w []float32, rows, c int, eps float64) (dx, dw []float64) {
	_, rstd := refRMSNorm(x, w, rows, c, eps)
	dx, dw = make([]float64, rows*c), make([]float64, c)
	for r := 0; r < rows; r++ {
		n := make([]float64, c)
		for j := range n {
			n[j] = float64(x[r*c+j]) * rstd[r]
		}
		for i := 0; i < c; i++ {
			var s float64
			for j := 0; j < c; j++ {
				jac := -n[i] * n[j] / float64(c)
				if i == j {
					jac++
				}
				s += float64(dy[r*c+j]) * float64(w[j]) * rstd[r] * jac
			}
			dx[r*c+i] = s
		}
		for j := 0; j < c; j++ {
			dw[j] += float64(dy[r*c+j]) * n[j]
		}
	}
	return dx, dw
}

// The backward reference agrees with central differences of the forward
// reference's Σ dy·y.
func testRMSNormReference(t *testing.T) {
	const rows, c, eps = 3, 5, 1e-5
	r := rng(71)
	x, w, dy := randVals(r, rows*c), randVals(r, c), randVals(r, rows*c)
	loss := func() float64 {
		y, _ := refRMSNorm(x, w, rows, c, eps)
		return dot64(y, dy)
	}
	dx, dw := refRMSNormBackward(dy, x, w, rows, c, eps)
	checkReferenceFD(t, "dx", x, dx, loss, 1e-4)
	checkReferenceFD(t, "dw", w, dw, loss, 1e-4)
}

func testRMSNorm(t *testing.T, e compute.Engine, nm compute.RMSNorms) {
	// shape is x's; its last dimension is normalised.
	for _, shape := range [][]int{{1, 1}, {3, 1}, {1, 7}, {5, 8}, {13, 33}, {4, 128}, {2, 3, 100}, {2, 65}} {
		c := shape[len(shape)-1]
		size := compute.ShapeSize("test", "RMSNorm", shape)
		rows := size / c
		r := rng(uint64(2000*rows + c))
		xv := randVals(r, size)
		for i := range xv {
			xv[i] = 3*xv[i] + 2 // not centred, not unit scale
		}
		wv, dyv := randVals(r, c), randVals(r, size)
		const eps = 1e-5
		x, w := tensorOf(e, xv, shape...), tensorOf(e, wv, c)
		y, rstd := tensorOf(e, nanVals(size), shape...), tensorOf(e, nanVals(rows), rows)
		nm.RMSNorm(y, rstd, x, w, eps)
		wantY, wantR := refRMSNorm(xv, wv, rows, c, eps)
		checkNear(t, "RMSNorm y", read(e, y), wantY, 1e-5)
		rs := read(e, rstd)
		for i := range rs {
			if math.Abs(float64(rs[i])-wantR[i]) > 1e-5*wantR[i] {
				t.Fatalf("RMSNorm %v: rstd[%d] = %v, want %v", shape, i, rs[i], wantR[i])
			}
		}
		wantDX, wantDW := refRMSNormBackward(dyv, xv, wv, rows, c, eps)
		for _, add := range []bool{false, true} {
			dxv := nanVals(size)
			if add {
				dxv = randVals(r, size)
			}
			dx, dy, dw := tensorOf(e, dxv, shape...), tensorOf(e, dyv, shape...), tensorOf(e, nanVals(c), c)
			nm.RMSNormBackward(dx, dw, dy, x, w, rstd, add)
			want := append([]float64(nil), wantDX...)
			if add {
				for i := range want {
					want[i] += float64(dxv[i])
				}
			}
			tol := 2e-5 * math.Max(1, float64(rows)/8)
			checkNear(t, "RMSNormBackward dx", read(e, dx), want, tol)
			checkNear(t, "RMSNormBackward dw", read(e, dw), wantDW, tol)
		}
	}
}
