package ddp

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// maskedSource is src with every target of the samples that mask names set
// to -1 (as fine-tuning masks a prompt's tokens), and without src's
// datasets.TargetCounter: the trainer gathers its rows to count them.
type maskedSource struct {
	datasets.Source
	mask func(i int) bool
}

func (s maskedSource) GatherBatch(idx []int, b datasets.Batch) {
	s.Source.GatherBatch(idx, b)
	k := s.Spec().Targets
	for r, i := range idx {
		if i >= 0 && s.mask(i) {
			for j := r * k; j < (r+1)*k; j++ {
				b.Y[j] = -1
			}
		}
	}
}

// TestMaskedTargetsGradient: a step's gradient is that of the loss it
// prints, the mean over the targets that are not -1. One SGD step on two
// windows, the second's targets all masked, moves the parameters as one
// step on the first window alone; it moved them half as far when the loss
// was scaled by the rows (each masked target diluting the others). On the
// CPU engine and on the emulated device with CUDA graphs (which hold a
// step's loss scale).
func TestMaskedTargetsGradient(t *testing.T) {
	const T = 16
	text := codeText(2*T+1, "m", "x", "*")[:2*T+1] // exactly two windows
	cfg := models.Config{Layers: 1, Heads: 2, Width: 16, Context: T}
	for _, name := range []string{"cpu", "emulated"} {
		run := func(src datasets.Source, batch int) []float32 {
			var b backend
			if name == "emulated" {
				b = emulatedBackend(true)
			} else {
				b = cpuBackend(t)
			}
			defer b.done()
			m, err := models.New("gpt", cfg)
			require.NoError(t, err)
			o, err := optim.New("sgd", optim.Config{})
			require.NoError(t, err)
			tr, err := New(b.c, b.e, m, o, Options{GlobalBatch: batch, MaxSteps: 1, Seed: 3, LR: 1})
			require.NoError(t, err)
			defer tr.Close()
			_, err = tr.Fit(context.Background(), src, nil)
			require.NoError(t, err)
			return tr.Params()
		}
		both, err := datasets.NewTokenSource([][]byte{text}, T, 256)
		require.NoError(t, err)
		first, err := datasets.NewTokenSource([][]byte{text[:T+1]}, T, 256)
		require.NoError(t, err)
		require.Equal(t, 2, both.Len())
		masked := run(maskedSource{both, func(i int) bool { return i == 1 }}, 2)
		alone := run(first, 1)
		unmasked := run(both, 2)
		var worst, apart float64
		for i := range alone {
			d := math.Abs(float64(masked[i] - alone[i]))
			worst = max(worst, d/max(math.Abs(float64(alone[i])), 1e-3))
			apart = max(apart, math.Abs(float64(unmasked[i]-alone[i])))
		}
		require.Less(t, worst, 1e-4, "%s: the masked pair's step against the first window's alone", name)
		require.Greater(t, apart, 1e-3, "%s: the test cannot tell the steps apart", name)
	}
}
