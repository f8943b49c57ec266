package models_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/internal/gradcheck"
	"github.com/symddp/symddp/models"
)

// tiedResidual is a network written against the contracts beyond a chain: a
// residual block, and a layer whose weight is another layer's (r1.weight
// serves the block's first layer and the "tie" layer). No ReLU, so that
// finite differences see a smooth loss.
func tiedResidual() *models.Classifier {
	tie := models.NewLinear("tie", 8, 8, compute.Identity)
	tie.TiedWeight = "r1.weight"
	return models.NewClassifier(models.NewSequential("tied-residual", []int{6}, 4,
		models.NewLinear("in", 6, 8, compute.Identity),
		models.NewResidual("res",
			models.NewLinear("r1", 8, 8, compute.Identity),
			models.NewLinear("r2", 8, 8, compute.Identity)),
		tie,
		models.NewLinear("out", 8, 4, compute.Identity)))
}

// built is a model built on an engine over arenas of its own.
type built struct {
	e          compute.Engine
	m          models.Model
	p, g       compute.Tensor // whole-arena views
	n          int
	in         models.Inputs
	stats      compute.Tensor
	host, grad []float32
}

func build(t *testing.T, e compute.Engine, m models.Model, rows int) *built {
	specs := m.Params()
	offsets, n := models.Layout(specs)
	var pa, ga compute.Arena
	if _, dev := e.(*cuda.Engine); dev {
		pt, gt := e.Alloc(n).(*cuda.Tensor), e.Alloc(n).(*cuda.Tensor)
		pa, ga = compute.Arena{Dev: pt.DevicePtr(), N: n}, compute.Arena{Dev: gt.DevicePtr(), N: n}
	} else {
		pa, ga = compute.HostArena(make([]float32, n)), compute.HostArena(make([]float32, n))
	}
	var pv, gv []compute.Tensor
	for i, s := range specs {
		pv = append(pv, e.View(pa, offsets[i], s.Shape...))
		gv = append(gv, e.View(ga, offsets[i], s.Shape...))
	}
	host := models.InitArena(specs, 7)
	b := &built{e: e, m: m, p: e.View(pa, 0, n), g: e.View(ga, 0, n), n: n, host: host, grad: make([]float32, n)}
	e.SetTensor(b.p, host)
	require.NoError(t, m.Build(e, pv, gv, rows))
	r := rand.New(rand.NewPCG(3, 3))
	x := make([]float32, rows*6)
	y := make([]int32, rows)
	for i := range x {
		x[i] = float32(2*r.Float64() - 1)
	}
	for i := range y {
		y[i] = int32(r.IntN(4))
	}
	y[rows-1] = -1 // a padding row counts for nothing
	b.in = models.Inputs{X: e.Alloc(rows, 6), Targets: e.AllocLabels(rows)}
	e.SetTensor(b.in.X, x)
	e.SetLabels(b.in.Targets, y)
	b.stats = e.Alloc(3)
	return b
}

// loss runs forward at the current parameters and returns the summed loss.
func (b *built) loss(scale float32) float64 {
	b.e.Zero(b.stats)
	b.m.Forward(b.in, scale, b.stats)
	var s [3]float32
	b.e.ReadTensor(s[:], b.stats)
	return float64(s[0])
}

// grads runs forward and backward and returns the gradient arena.
func (b *built) grads(scale float32) []float32 {
	b.loss(scale)
	b.m.Backward(nil)
	b.e.ReadTensor(b.grad, b.g)
	return b.grad
}

func compositeEngines(t *testing.T) map[string]compute.Engine {
	es := gradcheck.Engines(t)
	es["emulated-device"] = cudatest.NewEmulated(cuda.Options{})
	return es
}

// The declared parameters leave the tied use out; the tied weight's
// gradient is the sum of both uses, which central differences of the loss
// over the one arena slot see.
func TestResidualTiedGradients(t *testing.T) {
	const rows = 5
	m := tiedResidual()
	var names []string
	for _, p := range m.Params() {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{"in.weight", "in.bias", "r1.weight", "r1.bias", "r2.weight", "r2.bias", "tie.bias", "out.weight", "out.bias"}, names)
	for name, e := range compositeEngines(t) {
		t.Run(name, func(t *testing.T) {
			b := build(t, e, tiedResidual(), rows)
			loss := func() float64 {
				e.SetTensor(b.p, b.host)
				return b.loss(1)
			}
			gradcheck.CheckFD(t, "parameters", b.host, append([]float32(nil), b.grads(1)...), loss, 1e-2, 2e-3, 2e-2)
			e.SetTensor(b.p, b.host)
		})
	}
}

// The tied weight's gradient is the sum of what each use alone gives: the
// same network with the two uses' weights separate (holding the same
// values) has gradients that add up to the tied one.
func TestTiedGradientIsSumOfUses(t *testing.T) {
	const rows = 5
	e := gradcheck.Engines(t)["gonum"]
	tied := build(t, e, tiedResidual(), rows)
	gt := tied.grads(0.5)

	untie := models.NewLinear("tie", 8, 8, compute.Identity)
	sep := models.NewClassifier(models.NewSequential("untied", []int{6}, 4,
		models.NewLinear("in", 6, 8, compute.Identity),
		models.NewResidual("res",
			models.NewLinear("r1", 8, 8, compute.Identity),
			models.NewLinear("r2", 8, 8, compute.Identity)),
		untie,
		models.NewLinear("out", 8, 4, compute.Identity)))
	u := build(t, e, sep, rows)
	// Same values: copy r1.weight into tie.weight (untied arena order: in.w
	// in.b r1.w r1.b r2.w r2.b tie.w tie.b out.w out.b).
	specs := sep.Params()
	offs, _ := models.Layout(specs)
	r1, tw := offs[2], offs[6]
	copy(u.host[tw:tw+64], tied.host[r1:r1+64])
	copy(u.host[:tw], tied.host[:tw])
	copy(u.host[tw+64:], tied.host[tw:])
	e.SetTensor(u.p, u.host)
	gu := u.grads(0.5)
	for k := 0; k < 64; k++ {
		assert.InDelta(t, gu[r1+k]+gu[tw+k], gt[r1+k], 1e-5, "r1.weight[%d]", k)
	}
}

// A few SGD steps on the composite model lower its loss on the CPU and on
// the emulated device alike, and the two agree to float32 tolerance.
func TestResidualTiedTrains(t *testing.T) {
	const rows, steps = 8, 40
	final := map[string]float64{}
	for name, e := range compositeEngines(t) {
		b := build(t, e, tiedResidual(), rows)
		first := b.loss(1)
		for s := 0; s < steps; s++ {
			g := b.grads(1 / float32(rows-1))
			for i := range b.host {
				b.host[i] -= 0.1 * g[i]
			}
			e.SetTensor(b.p, b.host)
		}
		last := b.loss(1)
		assert.Less(t, last, 0.7*first, "%s: loss %v after %d steps, %v before", name, last, steps, first)
		final[name] = last
	}
	for name, v := range final {
		assert.InDelta(t, final["gonum"], v, 1e-3*math.Abs(final["gonum"]), "%s's final loss", name)
	}
}
