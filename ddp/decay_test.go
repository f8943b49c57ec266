package ddp

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// exempt is a model whose chosen parameters are exempt from weight decay.
type exempt struct {
	models.Model
	noDecay func(p models.ParamSpec) bool
}

func (x exempt) Params() []models.ParamSpec {
	ps := x.Model.Params()
	for i := range ps {
		ps[i].NoDecay = x.noDecay(ps[i])
	}
	return ps
}

func adamw(t *testing.T, wd float32) optim.Optimizer {
	o, err := optim.New("adamw", optim.Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: wd})
	require.NoError(t, err)
	return o
}

func exemptMLP(t *testing.T, noDecay func(models.ParamSpec) bool) models.Model {
	m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16}, Classes: 4})
	require.NoError(t, err)
	return exempt{Model: m, noDecay: noDecay}
}

// fitParams trains m on b and returns the final parameters.
func fitParams(t *testing.T, b backend, m models.Model, o optim.Optimizer) []float32 {
	defer b.done()
	train, _, err := datasets.SyntheticSplit(640, 10, 20, 4, 7)
	require.NoError(t, err)
	opts := baseOptions()
	opts.LR, opts.Epochs = 1e-2, 1
	tr, err := New(b.c, b.e, m, o, opts)
	require.NoError(t, err)
	_, err = tr.Fit(context.Background(), train, nil)
	require.NoError(t, err)
	defer tr.Close()
	return tr.Params()
}

// checkNoDecay trains on backends from newB: with every parameter exempt,
// AdamW with decay 0.5 must give the bits of decay 0; with the biases
// exempt, the biases must end elsewhere than in the run that decays them.
// It returns the parameters of the biases-exempt run.
func checkNoDecay(t *testing.T, newB func() backend) []float32 {
	t.Helper()
	all := func(models.ParamSpec) bool { return true }
	none := fitParams(t, newB(), exemptMLP(t, all), adamw(t, 0))
	exemptAll := fitParams(t, newB(), exemptMLP(t, all), adamw(t, 0.5))
	assert.Equal(t, none, exemptAll, "every parameter exempt: decay 0.5 must not change a bit")

	biases := func(p models.ParamSpec) bool { return len(p.Shape) == 1 }
	decayed := fitParams(t, newB(), exemptMLP(t, func(models.ParamSpec) bool { return false }), adamw(t, 0.5))
	mixed := fitParams(t, newB(), exemptMLP(t, biases), adamw(t, 0.5))
	specs := exemptMLP(t, biases).Params()
	offsets, _ := models.Layout(specs)
	for i, s := range specs {
		lo, hi := offsets[i], offsets[i]+s.Size()
		if s.NoDecay {
			assert.NotEqual(t, decayed[lo:hi], mixed[lo:hi], "%s is exempt: its values must differ from the decayed run's", s.Name)
		}
	}
	return mixed
}

// Parameters marked NoDecay get no weight decay (checkNoDecay) on the host.
func TestNoDecayExemptsParameters(t *testing.T) {
	checkNoDecay(t, func() backend { return cpuBackend(t) })
}

// The device update takes the exempt runs as a mask: on the (emulated) GPU
// step path checkNoDecay holds too, and the biases-exempt run ends near the
// host's.
func TestNoDecayOnDevice(t *testing.T) {
	mixed := checkNoDecay(t, func() backend { return emulatedBackend(true) })
	host := fitParams(t, cpuBackend(t), exemptMLP(t, func(p models.ParamSpec) bool { return len(p.Shape) == 1 }), adamw(t, 0.5))
	for j := range host {
		require.InDelta(t, host[j], mixed[j], 1e-4, "parameter %d: the device run and the host run", j)
	}
}

// badInit declares a Normal parameter without a deviation.
type badInit struct{ models.Model }

func (b badInit) Params() []models.ParamSpec {
	ps := b.Model.Params()
	ps[0].Init, ps[0].Std = models.Normal, 0
	return ps
}

// An initialisation that InitParams would refuse is an error of New on
// every PE (before PE 0 draws alone), not a panic on PE 0.
func TestNewRejectsBadInit(t *testing.T) {
	b := cpuBackend(t)
	defer b.done()
	m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16}, Classes: 4})
	require.NoError(t, err)
	_, err = New(b.c, b.e, badInit{m}, adamw(t, 0), baseOptions())
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "fc1.weight") && strings.Contains(err.Error(), "standard deviation 0"), err.Error())
}

// A replicated host step allocates nothing once it has run.
func TestHostStepDoesNotAllocate(t *testing.T) {
	b := cpuBackend(t)
	defer b.done()
	m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16}, Classes: 4})
	require.NoError(t, err)
	train, _, err := datasets.SyntheticSplit(6400, 10, 20, 4, 7)
	require.NoError(t, err)
	opts := baseOptions()
	opts.BucketBytes = 256 // several buckets: ready runs every step
	tr, err := New(b.c, b.e, m, adamw(t, 0.1), opts)
	require.NoError(t, err)
	defer tr.Close()
	require.Equal(t, "replicated", tr.Strategy())
	sm, err := datasets.NewShardSampler(train.Len(), opts.GlobalBatch, 1, 0, opts.Seed)
	require.NoError(t, err)
	require.NoError(t, tr.strat.prepare(tr, 100, train))
	s := 0
	step := func() {
		_, err := tr.strat.step(tr, sm, train, 0, s, false)
		require.NoError(t, err)
		s++
	}
	step()
	assert.Zero(t, testing.AllocsPerRun(20, step))
}
