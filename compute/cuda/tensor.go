package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

// Tensor is a tensor in device memory: an address, a shape and an element
// type, float32 (Alloc, View) or bf16 (AllocBF16, the views of
// BF16Masters). It is made by an Engine and only valid with that engine.
type Tensor struct {
	e     *Engine
	ptr   uintptr
	shape compute.Shape
	size  int
	dtype compute.DType // F32 (the zero value) or BF16
}

var _ compute.Tensor = (*Tensor)(nil)

// Shape is the tensor's shape, row-major. The caller must not modify it.
func (t *Tensor) Shape() compute.Shape { return t.shape }

// DType is compute.F32, or compute.BF16 for the engine's bf16 tensors.
func (t *Tensor) DType() compute.DType { return t.dtype }

// Size is the number of elements.
func (t *Tensor) Size() int { return t.size }

// DevicePtr is the device address of the first element.
func (t *Tensor) DevicePtr() uintptr { return t.ptr }

// bytes is the tensor's size in bytes.
func (t *Tensor) bytes() int { return t.dtype.Bytes() * t.size }

// Labels are class labels in device memory (int32, -1 for padding), with a
// host copy of what SetLabels last wrote, so that bad labels are caught on
// the host before a kernel sees them.
type Labels struct {
	e    *Engine
	ptr  uintptr
	host []int32
}

var _ compute.Labels = (*Labels)(nil)

// Len is the number of labels.
func (l *Labels) Len() int { return len(l.host) }

// DevicePtr is the device address of the labels.
func (l *Labels) DevicePtr() uintptr { return l.ptr }

// tensorOf is t as an fp32 tensor of this engine, or a panic naming op.
func (e *Engine) tensorOf(op string, t compute.Tensor) *Tensor {
	d := e.anyTensor(op, t)
	if d.dtype != compute.F32 {
		panicDType(op, d, compute.F32)
	}
	return d
}

// bf16Of is t as a bf16 tensor of this engine, or a panic naming op.
func (e *Engine) bf16Of(op string, t compute.Tensor) *Tensor {
	d := e.anyTensor(op, t)
	if d.dtype != compute.BF16 {
		panicDType(op, d, compute.BF16)
	}
	return d
}

// typedOf is t as a tensor of this engine of element type dt (F32 or BF16),
// or a panic naming op.
func (e *Engine) typedOf(op string, t compute.Tensor, dt compute.DType) *Tensor {
	d := e.anyTensor(op, t)
	if d.dtype != dt {
		panicDType(op, d, dt)
	}
	return d
}

// libDType is the library's name of dt (F32 or BF16), for the operations
// that take their tensors' element type.
func libDType(dt compute.DType) cudalib.DType {
	if dt == compute.BF16 {
		return cudalib.BFloat16
	}
	return cudalib.Float32
}

// anyTensor is t as a tensor of this engine of any element type.
func (e *Engine) anyTensor(op string, t compute.Tensor) *Tensor {
	d, ok := t.(*Tensor)
	if !ok || d == nil || d.e != e {
		panicNotMine(op, t)
	}
	return d
}

// optTensor is tensorOf, or nil for an absent tensor (a nil bias).
func (e *Engine) optTensor(op string, t compute.Tensor) *Tensor {
	if t == nil {
		return nil
	}
	if d, ok := t.(*Tensor); ok && d == nil {
		return nil
	}
	return e.tensorOf(op, t)
}

// matrix is t read as a (rows, cols) matrix: a tensor of rank above 2 is
// (Shape[0], product of the rest).
func (e *Engine) matrix(op string, t compute.Tensor) (d *Tensor, rows, cols int) {
	d = e.tensorOf(op, t)
	if len(d.shape) < 2 {
		compute.PanicShape("cuda", op, "a matrix (rank 2 or more)", d.shape)
	}
	return d, d.shape[0], d.size / d.shape[0]
}

// labelsOf is l as labels of this engine.
func (e *Engine) labelsOf(op string, l compute.Labels) *Labels {
	d, ok := l.(*Labels)
	if !ok || d == nil || d.e != e {
		panic(fmt.Sprintf("cuda: %s: labels %T are not this CUDA engine's", op, l))
	}
	return d
}

// overlap reports whether two tensors share device memory.
func overlap(a, b *Tensor) bool {
	return a.ptr < b.ptr+uintptr(b.bytes()) && b.ptr < a.ptr+uintptr(a.bytes())
}

// checkShape returns the number of elements of a valid shape.
func checkShape(op string, shape []int) int { return compute.ShapeSize("cuda", op, shape) }

// The panics are out of line so that formatting their messages costs
// nothing on the paths that do not fail.

//go:noinline
func panicNotMine(op string, t compute.Tensor) {
	panic(fmt.Sprintf("cuda: %s: tensor %T is not a tensor of this CUDA engine", op, t))
}

//go:noinline
func panicDType(op string, t *Tensor, want compute.DType) {
	panic(fmt.Sprintf("cuda: %s: a %v tensor of shape %v, want %v", op, t.dtype, []int(t.shape), want))
}

//go:noinline
func panicDevice(op string, err error) {
	panic(fmt.Sprintf("cuda: %s: %v", op, err))
}
