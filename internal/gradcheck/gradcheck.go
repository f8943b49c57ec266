// Package gradcheck holds what the gradient tests of package models and
// the public checker models/layertest share: a CPU engine per BLAS, tensors
// of random values, and the finite-difference comparison of an analytic
// gradient (FD), the one place it is written.
package gradcheck

import (
	"fmt"
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
	Fill(r, compute.HostData(t))
	return t
}

// Fill sets every element of v to a draw in [-1, 1).
func Fill(r *rand.Rand, v []float32) {
	for i := range v {
		v[i] = float32(2*r.Float64() - 1)
	}
}

// Dot is the float64 sum of a[i]*b[i].
func Dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// Tolerance is a finite-difference check's step and bounds: the central
// difference (f(v+Eps) - f(v-Eps)) / 2Eps and the analytic derivative agree
// when they differ by at most Atol + Rtol·|difference quotient|.
type Tolerance struct {
	Eps, Atol, Rtol float64
}

// Mismatch is one element whose analytic derivative disagrees with the
// difference quotient.
type Mismatch struct {
	What         string // the tensor: a parameter's name, "dx"
	Index        int    // the element, row-major
	Analytic, FD float64
}

func (m Mismatch) String() string {
	return fmt.Sprintf("%s[%d]: analytic %.6g, finite difference %.6g", m.What, m.Index, m.Analytic, m.FD)
}

// FD compares analytic[i], the derivative of f with respect to v[i], with
// the central difference of f at v[i] for every i, where f evaluates the
// objective for the current contents of v; the float32 steps are taken
// around v[i] and divided in float64. v is restored element by element. It
// returns the elements that disagree, in order; it panics when v and
// analytic differ in length (a caller's error).
func FD(what string, v, analytic []float32, f func() float64, tol Tolerance) []Mismatch {
	if len(v) != len(analytic) {
		panic(fmt.Sprintf("gradcheck: %s: %d values, %d gradients", what, len(v), len(analytic)))
	}
	var bad []Mismatch
	for i := range v {
		orig := v[i]
		hi, lo := orig+float32(tol.Eps), orig-float32(tol.Eps)
		v[i] = hi
		fHi := f()
		v[i] = lo
		fLo := f()
		v[i] = orig
		fd := (fHi - fLo) / (float64(hi) - float64(lo))
		an := float64(analytic[i])
		if math.Abs(fd-an) > tol.Atol+tol.Rtol*math.Abs(fd) {
			bad = append(bad, Mismatch{What: what, Index: i, Analytic: an, FD: fd})
		}
	}
	return bad
}

// Shown is how many disagreements of one tensor Report lists.
const Shown = 5

// Report is a line for each of the first Shown disagreements of bad (one
// tensor's), and one that counts the rest.
func Report(bad []Mismatch) []string {
	var lines []string
	for i, m := range bad {
		if i == Shown {
			lines = append(lines, fmt.Sprintf("%s: %d more disagreements", m.What, len(bad)-i))
			break
		}
		lines = append(lines, m.String())
	}
	return lines
}

// CheckFD is FD reported on t: Report's lines as errors. It returns how
// many elements it checked.
func CheckFD(t testing.TB, what string, v, analytic []float32, f func() float64, eps, atol, rtol float64) int {
	t.Helper()
	if len(v) != len(analytic) {
		t.Fatalf("%s: %d values, %d gradients", what, len(v), len(analytic))
	}
	for _, line := range Report(FD(what, v, analytic, f, Tolerance{Eps: eps, Atol: atol, Rtol: rtol})) {
		t.Error(line)
	}
	return len(v)
}
