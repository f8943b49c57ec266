package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/optim"
)

// optimizerCases are the optimizers whose device update must reproduce
// optim's Update bit for bit.
func optimizerCases(t *testing.T) map[string]optim.Optimizer {
	t.Helper()
	out := map[string]optim.Optimizer{}
	add := func(name string, o optim.Optimizer, err error) {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = o
	}
	for _, wd := range []float32{0, 0.01} {
		sfx := ""
		if wd != 0 {
			sfx = "+wd"
		}
		o, err := optim.NewSGD(optim.SGDConfig{WeightDecay: wd})
		add("sgd"+sfx, o, err)
		o, err = optim.NewSGD(optim.SGDConfig{Momentum: 0.9, WeightDecay: wd})
		add("momentum"+sfx, o, err)
		o, err = optim.NewSGD(optim.SGDConfig{Momentum: 0.9, Nesterov: true, WeightDecay: wd})
		add("nesterov"+sfx, o, err)
		ac := optim.DefaultAdamConfig()
		ac.WeightDecay = wd
		a, err := optim.NewAdam(ac)
		add("adam"+sfx, a, err)
		wc := optim.DefaultAdamWConfig()
		wc.WeightDecay = wd
		w, err := optim.NewAdamW(wc)
		add("adamw"+sfx, w, err)
	}
	return out
}

// updateValues are parameters and gradients with awkward members: signed
// zeros, subnormals (no flush to zero), large and tiny magnitudes.
func updateValues(r *rand.Rand, n int) (p, g []float32) {
	p, g = make([]float32, n), make([]float32, n)
	for i := range p {
		p[i] = float32(r.NormFloat64())
		g[i] = float32(r.NormFloat64() * 0.1)
	}
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, 1e30, -1e-30, 65504, 1}
	for i, v := range special {
		g[3*i] = v
		p[3*i+1] = v
	}
	return p, g
}

// runUpdates applies steps updates with o on the engine to arenas laid at
// element off of a larger device arena, and on the host with o.Update
// (after optim.ClipGlobalNorm when clip > 0), and compares the bits of the
// parameters and the state after every step.
//
// With spans, the elements of spans are exempt from weight decay
// (SetDecayExempt) and the host runs them with o's kind at weight decay 0.
func runUpdates(t *testing.T, e *cuda.Engine, o optim.Optimizer, n, off, steps int, clip float32, spans [][2]int) {
	t.Helper()
	if spans != nil {
		if err := e.SetDecayExempt(n, spans); err != nil {
			t.Fatal(err)
		}
	}
	hostUpdate := hostUpdater(t, o, spans)
	r := rand.New(rand.NewPCG(uint64(n), uint64(off)))
	hp, hg := updateValues(r, n)
	pArena := e.Alloc(n + off + 4).(*cuda.Tensor)
	gArena := e.Alloc(n + off + 4).(*cuda.Tensor)
	pa := compute.Arena{Dev: pArena.DevicePtr(), N: pArena.Size()}
	ga := compute.Arena{Dev: gArena.DevicePtr(), N: gArena.Size()}
	pv, gv := e.View(pa, off, n), e.View(ga, off, n)
	e.SetTensor(pv, hp)
	state := make([][]float32, o.Slots())
	for i := range state {
		state[i] = make([]float32, n)
	}
	got := make([]float32, n)
	for step := 1; step <= steps; step++ {
		lr := float32(0.05) / float32(step)
		if step > 1 { // fresh gradients every step
			for i := range hg {
				hg[i] = float32(r.NormFloat64() * 0.1)
			}
		}
		e.SetTensor(gv, hg)
		if err := e.Update(o, pv, gv, step, lr, clip); err != nil {
			t.Fatalf("step %d: Update: %v", step, err)
		}
		g := append([]float32(nil), hg...)
		if clip > 0 {
			norm := optim.GlobalNorm(g)
			want, _ := optim.ClipFactor(norm, clip)
			_, scale, _, err := e.UpdateStatus()
			if err != nil {
				t.Fatal(err)
			}
			if scale != want {
				t.Fatalf("step %d: clip factor %v, want %v (norm %v)", step, scale, want, norm)
			}
			optim.Scale(g, want)
		}
		hostUpdate(hp, g, state, 0, step, lr)
		e.ReadTensor(got, pv)
		compareBits(t, fmt.Sprintf("step %d: params", step), got, hp)
		for i, s := range e.OptimizerState() {
			e.ReadTensor(got, s)
			compareBits(t, fmt.Sprintf("step %d: state %s", step, o.StateNames()[i]), got, state[i])
		}
	}
}

// hostUpdater returns o's update on the host of elements [off, off+len(p))
// of an arena whose elements in spans are exempt from weight decay: runs of
// exempt elements are updated by o's kind at weight decay 0, the others by o.
func hostUpdater(t *testing.T, o optim.Optimizer, spans [][2]int) func(p, g []float32, state [][]float32, off, step int, lr float32) {
	t.Helper()
	if spans == nil {
		return func(p, g []float32, state [][]float32, _, step int, lr float32) { o.Update(p, g, state, step, lr) }
	}
	h := o.Hyper()
	h.WeightDecay = 0
	o0, err := optim.New(h.Kind, h.Config)
	if err != nil {
		t.Fatal(err)
	}
	exempt := func(i int) bool {
		for _, sp := range spans {
			if sp[0] <= i && i < sp[1] {
				return true
			}
		}
		return false
	}
	return func(p, g []float32, state [][]float32, off, step int, lr float32) {
		n := len(p)
		for i := 0; i < n; {
			ex := exempt(off + i)
			j := i + 1
			for j < n && exempt(off+j) == ex {
				j++
			}
			sub := make([][]float32, len(state))
			for k := range state {
				sub[k] = state[k][i:j:j]
			}
			oo := o
			if ex {
				oo = o0
			}
			oo.Update(p[i:j:j], g[i:j:j], sub, step, lr)
			i = j
		}
	}
}

func compareBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad++; bad <= 3 {
				t.Errorf("%s[%d] = %v (%#08x), want %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d elements differ", what, bad)
	}
}

func testUpdatesBitwise(t *testing.T, newEngine func(t *testing.T) *cuda.Engine) {
	for name, o := range optimizerCases(t) {
		for _, c := range []struct {
			n, off int
			clip   float32
			spans  [][2]int
		}{{4099, 0, 0, nil}, {1001, 1, 0, nil}, {4099, 0, 0.5, nil}, {4099, 0, 0, [][2]int{{5, 900}, {2000, 2003}, {4000, 4099}}}} {
			t.Run(fmt.Sprintf("%s/n=%d/off=%d/clip=%g/exempt=%d", name, c.n, c.off, c.clip, len(c.spans)), func(t *testing.T) {
				runUpdates(t, newEngine(t), o, c.n, c.off, 3, c.clip, c.spans)
			})
		}
	}
}

func TestUpdateBitwiseGPU(t *testing.T) {
	gpuEngine(t) // skips without a GPU
	testUpdatesBitwise(t, func(t *testing.T) *cuda.Engine { return gpuEngine(t) })
}

func TestUpdateBitwiseEmulated(t *testing.T) {
	testUpdatesBitwise(t, func(*testing.T) *cuda.Engine { return cudatest.NewEmulated(cuda.Options{}) })
}

// A non-finite gradient skips the update; with a halt, later updates skip
// too until the status is reset.
func testUpdateSkips(t *testing.T, e *cuda.Engine) {
	o, err := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	const n = 37
	p, g := e.Alloc(n), e.Alloc(n)
	hp := make([]float32, n)
	for i := range hp {
		hp[i] = float32(i)
	}
	e.SetTensor(p, hp)
	hg := make([]float32, n)
	hg[5] = float32(math.NaN())
	e.SetTensor(g, hg)
	e.SetHaltOnNonFinite(true)
	if err := e.Update(o, p, g, 1, 0.1, 0); err != nil {
		t.Fatal(err)
	}
	skipped, _, _, err := e.UpdateStatus()
	if err != nil || !skipped {
		t.Fatalf("UpdateStatus after a NaN gradient = skipped %v, %v; want skipped", skipped, err)
	}
	hg[5] = 1
	e.SetTensor(g, hg)
	if err := e.Update(o, p, g, 2, 0.1, 0); err != nil {
		t.Fatal(err)
	}
	if skipped, _, _, _ := e.UpdateStatus(); !skipped {
		t.Fatal("an update after a halt was not skipped")
	}
	got := make([]float32, n)
	e.ReadTensor(got, p)
	compareBits(t, "params after skipped updates", got, hp)
	if err := e.ResetUpdateStatus(); err != nil {
		t.Fatal(err)
	}
	if err := e.Update(o, p, g, 1, 0.1, 0); err != nil {
		t.Fatal(err)
	}
	e.ReadTensor(got, p)
	if skipped, _, _, _ := e.UpdateStatus(); skipped || got[5] != 5-0.1*1 {
		t.Errorf("after ResetUpdateStatus: skipped %v, p[5] = %v; want an update to %v", skipped, got[5], float32(5-0.1))
	}
}

func TestUpdateSkipsGPU(t *testing.T)      { testUpdateSkips(t, gpuEngine(t)) }
func TestUpdateSkipsEmulated(t *testing.T) { testUpdateSkips(t, cudatest.NewEmulated(cuda.Options{})) }

func TestUpdateRejectsMismatch(t *testing.T) {
	e := cudatest.NewEmulated(cuda.Options{})
	sgd, _ := optim.NewSGD(optim.SGDConfig{Momentum: 0.9})
	adam, _ := optim.NewAdam(optim.DefaultAdamConfig())
	p, g := e.Alloc(8), e.Alloc(8)
	if err := e.Update(sgd, p, g, 1, 0.1, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Update(adam, p, g, 2, 0.1, 0); err == nil {
		t.Error("Update with another optimizer after state was made for sgd succeeded")
	}
	if err := e.Update(sgd, p, e.Alloc(9), 2, 0.1, 0); err == nil {
		t.Error("Update with 9 gradients for 8 parameters succeeded")
	}
	if err := e.Update(sgd, p, g, 0, 0.1, 0); err == nil {
		t.Error("Update at step 0 succeeded")
	}
}
