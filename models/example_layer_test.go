package models_test

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/models"
)

// shift is a user layer, y = x + b with a learnable b per feature, written
// against compute.Engine alone, so it runs on every engine (CPU and GPU).
// A layer that needs loops of its own can use compute.HostData on the CPU
// engine instead; examples/convnet does so for convolution and pooling.
type shift struct {
	name     string
	n        int
	e        compute.Engine
	b, db    compute.Tensor // (N) parameter and its gradient: views into the arenas
	y        compute.Tensor // (B,N) output, allocated at Build
	needGrad bool
}

// Params declares b (N).
func (s *shift) Params() []models.ParamSpec {
	return []models.ParamSpec{{Name: s.name + ".bias", Shape: []int{s.n}, Init: models.Zeros}}
}

// Build takes the views of b and db and allocates y; the output sample has
// the input's shape.
func (s *shift) Build(b models.Build) ([]int, error) {
	if len(b.In) != 1 || b.In[0] != s.n {
		return nil, fmt.Errorf("%s: input of shape %v, want [%d]", s.name, b.In, s.n)
	}
	s.e, s.b, s.db, s.needGrad = b.Engine, b.Params[0], b.Grads[0], b.NeedInputGrad
	s.y = s.e.Alloc(b.Batch, s.n)
	return b.In, nil
}

// Forward computes y = x + b; x and y are (B,N).
func (s *shift) Forward(x compute.Tensor) compute.Tensor {
	s.e.Copy(s.y, x)
	s.e.BiasAct(s.y, s.b, compute.Identity)
	return s.y
}

// Backward writes db = the column sums of dy (B,N) and passes dy on as the
// input gradient: ∂y/∂x is the identity.
func (s *shift) Backward(dy compute.Tensor) compute.Tensor {
	s.e.BiasActBackward(dy, s.y, s.db, compute.Identity, false)
	if !s.needGrad {
		return nil
	}
	return dy
}

// A model composed of a user layer and a provided one. The parameters of
// both are views into the same two arenas, in declaration order, so the
// trainer reduces and updates them together with no code of the layer's.
func Example_customLayer() {
	m := models.NewSequential("shifted", []int{3}, 2,
		&shift{name: "shift", n: 3},
		models.NewLinear("out", 3, 2, compute.Identity))
	specs := m.Params()
	offsets, total := models.Layout(specs)
	for i, p := range specs {
		fmt.Printf("%-10s %v at %d\n", p.Name, p.Shape, offsets[i])
	}

	e, err := cpu.New(cpu.Options{BLAS: blas.Gonum, Threads: 1})
	if err != nil {
		panic(err)
	}
	params, grads := make([]float32, total), make([]float32, total)
	copy(params, []float32{
		1, 2, 3, // shift.bias
		1, 0, 0, // out.weight (2,3)
		0, 1, 1,
		0, 0, // out.bias
	})
	var pv, gv []compute.Tensor
	for i, p := range specs {
		pv = append(pv, e.View(compute.HostArena(params), offsets[i], p.Shape...))
		gv = append(gv, e.View(compute.HostArena(grads), offsets[i], p.Shape...))
	}
	const batch = 2
	if err := m.Build(e, pv, gv, batch); err != nil {
		panic(err)
	}
	x := e.Alloc(batch, 3)
	e.SetTensor(x, []float32{0, 0, 0, 1, 1, 1})
	logits := make([]float32, batch*2)
	e.ReadTensor(logits, m.Forward(x))
	fmt.Println("logits:", logits)

	dlogits := e.Alloc(batch, 2)
	e.SetTensor(dlogits, []float32{1, 0, 0, 1})
	m.Backward(dlogits, func(first int) { fmt.Println("gradients final from parameter", first) })
	fmt.Println("shift.bias grad:", grads[:3])
	// Output:
	// shift.bias [3] at 0
	// out.weight [2 3] at 3
	// out.bias   [2] at 9
	// logits: [1 5 2 7]
	// gradients final from parameter 1
	// gradients final from parameter 0
	// shift.bias grad: [1 1 1]
}
