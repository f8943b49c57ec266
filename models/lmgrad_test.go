package models_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/internal/gradcheck"
	"github.com/symddp/symddp/models"
)

// checkLMGradients checks a language model's backward: after loss() (a
// forward whose summed loss it returns), Backward reports ready down the
// arena with the embeddings last, and every gradient element of g matches
// central differences of loss over the parameters p (eps 1e-3, within
// 3e-3 + 3% of the difference).
func checkLMGradients(t *testing.T, m models.Model, p, g []float32, loss func() float64) {
	t.Helper()
	loss()
	var ready []int
	m.Backward(func(first int) { ready = append(ready, first) })
	require.NotEmpty(t, ready)
	require.Equal(t, 0, ready[len(ready)-1], "the embeddings finish last")
	for i := 1; i < len(ready); i++ {
		assert.Less(t, ready[i], ready[i-1], "ready goes down the arena")
	}
	gradcheck.CheckFD(t, "parameters", p, append([]float32(nil), g...), loss, 1e-3, 3e-3, 3e-2)
}

// deviceViews allocates one arena of m's parameters on the device engine
// e and returns a view per parameter, given as both the parameter and the
// gradient views of a Build that only has to get as far as its checks.
func deviceViews(e compute.Engine, m models.Model) []compute.Tensor {
	specs := m.Params()
	offsets, n := models.Layout(specs)
	pt := e.Alloc(n).(*cuda.Tensor)
	a := compute.Arena{Dev: pt.DevicePtr(), N: n}
	pv := make([]compute.Tensor, len(specs))
	for i, s := range specs {
		pv[i] = e.View(a, offsets[i], s.Shape...)
	}
	return pv
}
