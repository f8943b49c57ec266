// Package gradcheck holds what the layer tests of package models and of
// examples/convnet share: a CPU engine per BLAS, tensors of random values,
// and the finite-difference check of an analytic gradient.
package gradcheck

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/compute/cpu"
)

// Engines returns a one-thread CPU engine per BLAS available here, by the
// BLAS's name.
func Engines(t testing.TB) map[string]compute.Engine {
	t.Helper()
	out := map[string]compute.Engine{}
	for _, k := range []blas.Kind{blas.Gonum, blas.OpenBLAS} {
		e, err := cpu.New(cpu.Options{BLAS: k, Threads: 1})
		if err != nil {
			t.Logf("%s not tested: %v", k, err)
			continue
		}
		out[string(k)] = e
	}
	return out
}

// Uniform allocates a tensor of the shape with draws in [-1, 1).
func Uniform(e compute.Engine, r *rand.Rand, shape ...int) compute.Tensor {
	t := e.Alloc(shape...)
	d := compute.HostData(t)
	for i := range d {
		d[i] = float32(2*r.Float64() - 1)
	}
	return t
}

// Dot is the float64 sum of a[i]*b[i].
func Dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// CheckFD compares analytic[i], the derivative of f with respect to v[i],
// with the central difference (f(v[i]+eps) - f(v[i]-eps)) / 2eps for every
// i, where f evaluates the objective for the current contents of v; they
// agree when they differ by at most atol + rtol·|difference quotient|. It
// reports the first five disagreements and returns how many elements it
// checked.
func CheckFD(t *testing.T, what string, v, analytic []float32, f func() float64, eps, atol, rtol float64) int {
	t.Helper()
	if len(v) != len(analytic) {
		t.Fatalf("%s: %d values, %d gradients", what, len(v), len(analytic))
	}
	bad := 0
	for i := range v {
		orig := v[i]
		hi, lo := orig+float32(eps), orig-float32(eps)
		v[i] = hi
		fHi := f()
		v[i] = lo
		fLo := f()
		v[i] = orig
		fd := (fHi - fLo) / (float64(hi) - float64(lo))
		an := float64(analytic[i])
		if math.Abs(fd-an) > atol+rtol*math.Abs(fd) {
			if bad++; bad <= 5 {
				t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", what, i, an, fd)
			}
		}
	}
	return len(v)
}
