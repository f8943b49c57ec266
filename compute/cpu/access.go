package cpu

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// data is the memory behind a tensor this engine made.
func data(op string, t compute.Tensor) []float32 {
	d, ok := t.(*Tensor)
	if !ok || d == nil {
		panicNotCPU(op, t)
	}
	return d.Float32s()
}

// optData is data, or nil for a nil tensor (an absent bias).
func optData(op string, t compute.Tensor) []float32 {
	if t == nil {
		return nil
	}
	if d, ok := t.(*Tensor); ok && d == nil {
		return nil
	}
	return data(op, t)
}

// matrix is the memory behind t and t read as a (rows, cols) matrix: a
// tensor of rank above 2 is (Shape[0], product of the rest).
func matrix(op string, t compute.Tensor) (s []float32, rows, cols int) {
	s = data(op, t)
	sh := t.Shape()
	if len(sh) < 2 {
		compute.PanicShape("cpu", op, "a matrix (rank 2 or more)", sh)
	}
	return s, sh[0], len(s) / sh[0]
}

// labelData is the memory behind labels this engine made.
func labelData(op string, l compute.Labels) []int32 {
	c, ok := l.(*Labels)
	if !ok || c == nil {
		panic(fmt.Sprintf("cpu: %s: labels %T are not the CPU engine's", op, l))
	}
	return c.v
}

// The panics are out of line so that formatting their messages costs
// nothing on the paths that do not fail.

//go:noinline
func panicNotCPU(op string, t compute.Tensor) {
	panic(fmt.Sprintf("cpu: %s: tensor %T is not a float32 tensor of the CPU engine", op, t))
}
