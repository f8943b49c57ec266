package models_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
)

// hidden is a layer that shows only the Layer methods of the one it wraps,
// so that a residual block around it takes the form of a block of
// arbitrary layers: no norm adding into the block's gradient, no output the
// block adds onto.
type hidden struct{ models.Layer }

// residualNet is two pre-norm residual blocks ending in Linear layers
// without an activation; plain hides the blocks' layers (the form any
// layers get), norms hides only the norms (the block adds onto its last
// layer's output but copies its gradient).
func residualNet(plain, norms bool) *models.Classifier {
	wrap := func(l models.Layer, hide bool) models.Layer {
		if hide {
			return hidden{l}
		}
		return l
	}
	block := func(name string) *models.Residual {
		return models.NewResidual(name,
			wrap(models.NewLayerNorm(name+".ln", 8), plain || norms),
			wrap(models.NewLinear(name+".fc", 8, 8, compute.Identity), plain))
	}
	return models.NewClassifier(models.NewSequential("residual", []int{6}, 4,
		models.NewLinear("in", 6, 8, compute.Identity), block("a"), block("b"),
		models.NewLinear("out", 8, 4, compute.Identity)))
}

// A residual block whose first layer adds its input gradient into the
// block's, whose gradient is one tensor updated in place and whose input is
// added onto its last layer's output gives the bits of the block that
// copies and adds, on every engine: the same float32 adds of the same
// values.
func TestResidualFormsSameBits(t *testing.T) {
	const rows = 7
	for name, e := range compositeEngines(t) {
		ref := build(t, e, residualNet(true, false), rows)
		wantLoss, wantGrad := ref.loss(0.5), append([]float32(nil), ref.grads(0.5)...)
		for _, norms := range []bool{false, true} {
			b := build(t, e, residualNet(false, norms), rows)
			assert.Equal(t, math.Float64bits(wantLoss), math.Float64bits(b.loss(0.5)), "%s (norms hidden %v): loss", name, norms)
			got := b.grads(0.5)
			for i := range wantGrad {
				if math.Float32bits(got[i]) != math.Float32bits(wantGrad[i]) {
					t.Errorf("%s (norms hidden %v): gradient %d is %v, want %v", name, norms, i, got[i], wantGrad[i])
					break
				}
			}
		}
	}
}
