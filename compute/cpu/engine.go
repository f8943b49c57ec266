// Package cpu is symddp's CPU compute engine. Its tensors ([Tensor]) are
// gorgonia.org/tensor Dense views over host memory (an arena or memory the
// engine allocated at build time), its GEMM is OpenBLAS's, loaded at run
// time, or gonum's pure-Go kernels (see compute/blas), and its elementwise
// operations are plain loops. No operation allocates.
package cpu

import (
	"fmt"
	"log/slog"
	"unsafe"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/internal/hostloops"
	"gorgonia.org/tensor"
)

// Options configure an Engine.
type Options struct {
	// Threads is how many threads a GEMM may use; 0 leaves the BLAS's
	// setting (OpenBLAS: all cores or $OPENBLAS_NUM_THREADS; gonum: 1).
	// Several PEs on one host should each ask for 1. The setting is
	// process-wide (it is the BLAS library's).
	Threads int
	// BLAS picks the BLAS: "auto", "openblas" or "gonum"; empty means
	// $SYMDDP_BLAS, and auto when that is unset too.
	BLAS blas.Kind
	// Logger, when set, receives one Info line that says which BLAS runs.
	Logger *slog.Logger
}

// Engine is the CPU compute.Engine. Its methods panic on programmer error
// (mismatched shapes, a tensor it did not make). One engine may be used by
// one goroutine at a time.
type Engine struct {
	blas *blas.BLAS
}

var _ compute.Engine = (*Engine)(nil)

// New returns a CPU engine on the BLAS that opts select. It makes that BLAS
// the one gorgonia's own tensor operations use (tensor.Use).
func New(opts Options) (*Engine, error) {
	kind := opts.BLAS
	if kind == "" {
		k, err := blas.FromEnv()
		if err != nil {
			return nil, fmt.Errorf("cpu engine: %w", err)
		}
		kind = k
	}
	b, err := blas.Load(kind)
	if err != nil {
		return nil, fmt.Errorf("cpu engine: %w", err)
	}
	b.SetThreads(opts.Threads)
	tensor.Use(b)
	e := &Engine{blas: b}
	if opts.Logger != nil {
		opts.Logger.Info("compute engine", "engine", e.Name(), "blas", e.Describe(), "loops", hostloops.Impl())
	}
	return e, nil
}

// Name is "cpu/openblas" or "cpu/gonum".
func (e *Engine) Name() string { return "cpu/" + string(e.blas.Kind()) }

// Describe says in one line which BLAS runs, its version and threads, and
// why OpenBLAS is not used when it is not.
func (e *Engine) Describe() string { return e.blas.String() }

// BLAS is the engine's BLAS.
func (e *Engine) BLAS() *blas.BLAS { return e.blas }

// Alloc returns a zeroed tensor in memory of its own.
func (e *Engine) Alloc(shape ...int) compute.Tensor {
	n := checkShape("Alloc", shape)
	return dense(make([]float32, n), shape)
}

// View returns a tensor over a.Host[off : off+prod(shape)].
func (e *Engine) View(a compute.Arena, off int, shape ...int) compute.Tensor {
	n := checkShape("View", shape)
	if a.Host == nil {
		panic("cpu: View of an arena without host memory")
	}
	if off < 0 || off+n > len(a.Host) {
		panic(fmt.Sprintf("cpu: View %v at offset %d is outside an arena of %d elements", shape, off, len(a.Host)))
	}
	return dense(a.Host[off:off+n:off+n], shape)
}

var _ compute.Joiner = (*Engine)(nil)

// Join returns a tensor of shape over ts when they lie back to back in
// this order (views of one arena, as ddp lays out a model's parameters)
// and hold its elements; nil otherwise.
func (e *Engine) Join(shape []int, ts ...compute.Tensor) compute.Tensor {
	n := checkShape("Join", shape)
	if len(ts) == 0 {
		return nil
	}
	total := 0
	var next unsafe.Pointer
	for i, t := range ts {
		d, ok := t.(*Tensor)
		if !ok || d == nil {
			return nil
		}
		s := d.Float32s()
		if len(s) == 0 || (i > 0 && unsafe.Pointer(&s[0]) != next) {
			return nil
		}
		next = unsafe.Add(unsafe.Pointer(&s[0]), 4*len(s))
		total += len(s)
	}
	if total != n {
		return nil
	}
	first := ts[0].(*Tensor).Float32s()
	return dense(unsafe.Slice(&first[0], n), shape)
}

// AllocLabels returns room for n labels.
func (e *Engine) AllocLabels(n int) compute.Labels {
	if n <= 0 {
		panic(fmt.Sprintf("cpu: AllocLabels(%d)", n))
	}
	return &Labels{v: make([]int32, n)}
}

// Sync returns at once: every CPU operation is complete when it returns.
func (e *Engine) Sync() error { return nil }

// Labels are the CPU engine's labels: a host slice of class indices, -1 for
// padding rows.
type Labels struct{ v []int32 }

// Len is the number of labels.
func (l *Labels) Len() int { return len(l.v) }

// Int32s is the labels' memory; a data loader may gather into it directly
// instead of going through SetLabels.
func (l *Labels) Int32s() []int32 { return l.v }

// Tensor is the CPU engine's float32 tensor: a gorgonia.org/tensor Dense
// over host memory (an arena's or the engine's), described by compute's
// own Shape and DType.
type Tensor struct {
	d     *tensor.Dense
	shape compute.Shape
}

var _ compute.Tensor = (*Tensor)(nil)

// Shape is the tensor's shape; the caller must not modify it.
func (t *Tensor) Shape() compute.Shape { return t.shape }

// DType is compute.F32.
func (t *Tensor) DType() compute.DType { return compute.F32 }

// Size is the number of elements.
func (t *Tensor) Size() int { return len(t.d.Float32s()) }

// Float32s is the tensor's memory (what compute.HostData returns).
func (t *Tensor) Float32s() []float32 { return t.d.Float32s() }

// Dense is the gorgonia tensor over the same memory, for code that wants
// gorgonia's own operations.
func (t *Tensor) Dense() *tensor.Dense { return t.d }

// dense wraps s, whose capacity is its length, as a tensor of the shape.
func dense(s []float32, shape []int) *Tensor {
	return &Tensor{d: tensor.New(tensor.WithShape(shape...), tensor.WithBacking(s)), shape: compute.Shape(append([]int(nil), shape...))}
}

func checkShape(op string, shape []int) int { return compute.ShapeSize("cpu", op, shape) }
