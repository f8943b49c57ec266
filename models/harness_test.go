package models

import (
	"math/rand/v2"

	"github.com/symddp/symddp/compute"
)

// arenas are a parameter and a gradient arena laid out for specs, with views.
type arenas struct {
	params, grads []float32
	offsets       []int
	pv, gv        []compute.Tensor
}

// newArenas lays out specs and fills the parameters with draws in [-1, 1).
func newArenas(e compute.Engine, specs []ParamSpec, r *rand.Rand) *arenas {
	offsets, total := Layout(specs)
	a := &arenas{params: make([]float32, total), grads: make([]float32, total), offsets: offsets}
	for i := range a.params {
		a.params[i] = float32(2*r.Float64() - 1)
	}
	for i, s := range specs {
		a.pv = append(a.pv, e.View(compute.HostArena(a.params), offsets[i], s.Shape...))
		a.gv = append(a.gv, e.View(compute.HostArena(a.grads), offsets[i], s.Shape...))
	}
	return a
}
