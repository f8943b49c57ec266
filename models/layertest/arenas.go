package layertest

import (
	"math"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// arenas are a layer's parameter and gradient arenas, laid out by
// models.Layout as a trainer lays out a model's, with the views Build takes.
// A parameter tied to another layer's (ParamSpec.TiedTo) gets room of its
// own: the layer is checked alone.
type arenas struct {
	params, grads []float32
	offsets       []int
	param         [][]float32 // params, one slice per ParamSpec
	pv, gv        []compute.Tensor
}

func newArenas(e compute.Engine, specs []models.ParamSpec) *arenas {
	offsets, total := models.Layout(specs)
	a := &arenas{params: make([]float32, total), grads: make([]float32, total), offsets: offsets}
	for i, s := range specs {
		a.param = append(a.param, a.params[offsets[i]:offsets[i]+s.Size()])
		a.pv = append(a.pv, e.View(compute.HostArena(a.params), offsets[i], s.Shape...))
		a.gv = append(a.gv, e.View(compute.HostArena(a.grads), offsets[i], s.Shape...))
	}
	return a
}

// firstDiff is the first index where a and b differ in bits (or in
// length: the shorter's length), -1 when they are the same.
func firstDiff(a, b []float32) int {
	for i := range min(len(a), len(b)) {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
