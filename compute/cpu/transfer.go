package cpu

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// SetTensor copies src into t; len(src) must be t.Size().
func (e *Engine) SetTensor(t compute.Tensor, src []float32) {
	d := data("SetTensor", t)
	if len(src) != len(d) {
		panic(fmt.Sprintf("cpu: SetTensor: %d values for a tensor of shape %v", len(src), []int(t.Shape())))
	}
	copy(d, src)
}

// ReadTensor copies t into dst; len(dst) must be t.Size().
func (e *Engine) ReadTensor(dst []float32, t compute.Tensor) {
	d := data("ReadTensor", t)
	if len(dst) != len(d) {
		panic(fmt.Sprintf("cpu: ReadTensor: room for %d values from a tensor of shape %v", len(dst), []int(t.Shape())))
	}
	copy(dst, d)
}

// SetLabels copies src into l; len(src) must be l.Len().
func (e *Engine) SetLabels(l compute.Labels, src []int32) {
	d := labelData("SetLabels", l)
	if len(src) != len(d) {
		panic(fmt.Sprintf("cpu: SetLabels: %d labels for room of %d", len(src), len(d)))
	}
	copy(d, src)
}

// Zero sets every element of t to 0.
func (e *Engine) Zero(t compute.Tensor) { clear(data("Zero", t)) }

// Copy copies src into dst; they must have the same size.
func (e *Engine) Copy(dst, src compute.Tensor) {
	d, s := data("Copy", dst), data("Copy", src)
	if len(d) != len(s) {
		compute.PanicShapes("cpu", "Copy", "dst and src must have the same size", dst.Shape(), src.Shape())
	}
	copy(d, s)
}
