package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/models/layertest"
)

// engines are a one-thread CPU engine per BLAS this host has (gonum
// always; OpenBLAS where its library is installed).
func engines(t *testing.T) []compute.Engine {
	var es []compute.Engine
	for _, k := range []blas.Kind{blas.Gonum, blas.OpenBLAS} {
		if e, err := cpu.New(cpu.Options{BLAS: k, Threads: 1}); err == nil {
			es = append(es, e)
		}
	}
	return es
}

// uniform fills v with draws in [-1, 1).
func uniform(r *rand.Rand, v []float32) []float32 {
	for i := range v {
		v[i] = float32(2*r.Float64() - 1)
	}
	return v
}

// layerArenas lays out a layer's parameters in a parameter and a gradient
// arena, fills the parameters with draws in [-1, 1) and returns the views.
func layerArenas(e compute.Engine, specs []models.ParamSpec, r *rand.Rand) (params, grads []float32, pv, gv []compute.Tensor) {
	offsets, total := models.Layout(specs)
	params, grads = uniform(r, make([]float32, total)), make([]float32, total)
	for i, s := range specs {
		pv = append(pv, e.View(compute.HostArena(params), offsets[i], s.Shape...))
		gv = append(gv, e.View(compute.HostArena(grads), offsets[i], s.Shape...))
	}
	return params, grads, pv, gv
}

// directConv is the textbook convolution in float64, the reference for
// Conv2D's forward pass, before the activation: x is (B,C,H,W), w is
// (F,C,K,K), the result (B,F,Ho,Wo).
func directConv(x, w, bias []float32, batch, c, h, wd, f, k, pad int) []float64 {
	ho, wo := h+2*pad-k+1, wd+2*pad-k+1
	out := make([]float64, batch*f*ho*wo)
	for b := 0; b < batch; b++ {
		for o := 0; o < f; o++ {
			for i := 0; i < ho; i++ {
				for j := 0; j < wo; j++ {
					s := float64(bias[o])
					for ch := 0; ch < c; ch++ {
						for ki := 0; ki < k; ki++ {
							for kj := 0; kj < k; kj++ {
								iy, ix := i+ki-pad, j+kj-pad
								if iy < 0 || iy >= h || ix < 0 || ix >= wd {
									continue
								}
								s += float64(w[((o*c+ch)*k+ki)*k+kj]) * float64(x[((b*c+ch)*h+iy)*wd+ix])
							}
						}
					}
					out[((b*f+o)*ho+i)*wo+j] = s
				}
			}
		}
	}
	return out
}

func TestConv2DForwardMatchesDirectConvolution(t *testing.T) {
	const batch, c, h, w, f, k = 2, 3, 7, 6, 4, 3
	for _, e := range engines(t) {
		for _, pad := range []Padding{Valid, Same} {
			t.Run(fmt.Sprintf("%s/pad=%d", e.Name(), pad), func(t *testing.T) {
				r := rand.New(rand.NewPCG(5, 5))
				l := NewConv2D("conv", c, f, k, pad, compute.Identity)
				params, _, pv, gv := layerArenas(e, l.Params(), r)
				out, err := l.Build(models.Build{Engine: e, Batch: batch, Params: pv, Grads: gv, In: []int{c, h, w}, NeedInputGrad: true})
				if err != nil {
					t.Fatal(err)
				}
				p := 0
				if pad == Same {
					p = 1
				}
				ho, wo := h+2*p-k+1, w+2*p-k+1
				if !slices.Equal(out, []int{f, ho, wo}) {
					t.Fatalf("output shape %v, want %v", out, []int{f, ho, wo})
				}
				x := e.Alloc(batch, c, h, w)
				uniform(r, compute.HostData(x))
				y := l.Forward(x)
				if !slices.Equal([]int(y.Shape()), []int{batch, f, ho, wo}) {
					t.Fatalf("y has shape %v", y.Shape())
				}
				want := directConv(compute.HostData(x), params[:f*c*k*k], params[f*c*k*k:], batch, c, h, w, f, k, p)
				for i, got := range compute.HostData(y) {
					if math.Abs(float64(got)-want[i]) > 1e-5 {
						t.Fatalf("y[%d] = %v, direct convolution gives %v", i, got, want[i])
					}
				}
			})
		}
	}
}

// TestConv2DGradients checks Conv2D with models/layertest, for both
// paddings, with and without ReLU: dW, db and dx against central
// differences of Σ R ⊙ y, and the Layer contract (gradients overwritten,
// or added to where Build marks them AddGrads; Forward deterministic).
func TestConv2DGradients(t *testing.T) {
	const batch, c, h, w, f, k = 2, 2, 6, 5, 3, 3
	for _, e := range engines(t) {
		for _, pad := range []Padding{Valid, Same} {
			for _, act := range []compute.Activation{compute.Identity, compute.ReLU} {
				t.Run(fmt.Sprintf("%s/pad=%d/act=%d", e.Name(), pad, act), func(t *testing.T) {
					p := 0
					if pad == Same {
						p = 1
					}
					var o layertest.Options
					if act == compute.ReLU {
						// Only draws with every pre-activation farther than
						// 3 eps from ReLU's kink: a step moves one by at
						// most eps.
						o.Accept = func(params [][]float32, x []float32) bool {
							return minAbs(directConv(x, params[0], params[1], batch, c, h, w, f, k, p)) > 3*layertest.DefaultEps
						}
					}
					n, err := layertest.Check(e, NewConv2D("conv", c, f, k, pad, act), batch, []int{c, h, w}, o)
					if err != nil {
						t.Fatal(err)
					}
					if want := f*c*k*k + f + batch*c*h*w; n != want {
						t.Errorf("checked %d elements, want %d", n, want)
					}
				})
			}
		}
	}
}

func minAbs(z []float64) float64 {
	m := math.Inf(1)
	for _, v := range z {
		m = math.Min(m, math.Abs(v))
	}
	return m
}

func TestConv2DFirstLayerSkipsInputGradient(t *testing.T) {
	e := engines(t)[0]
	l := NewConv2D("conv", 1, 2, 3, Same, compute.ReLU)
	_, _, pv, gv := layerArenas(e, l.Params(), rand.New(rand.NewPCG(1, 1)))
	if _, err := l.Build(models.Build{Engine: e, Batch: 2, Params: pv, Grads: gv, In: []int{1, 4, 4}}); err != nil {
		t.Fatal(err)
	}
	l.Forward(e.Alloc(2, 1, 4, 4))
	if dx := l.Backward(e.Alloc(2, 2, 4, 4)); dx != nil {
		t.Errorf("Backward of a first layer returned %v, want nil", dx)
	}
}

func TestConv2DBuildErrors(t *testing.T) {
	e := engines(t)[0]
	l := NewConv2D("conv", 3, 2, 5, Valid, compute.Identity)
	_, _, pv, gv := layerArenas(e, l.Params(), rand.New(rand.NewPCG(1, 1)))
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{784}, "conv: input samples of shape [784], want (3,H,W)"},
		{[]int{1, 28, 28}, "conv: input samples of shape [1 28 28], want (3,H,W)"},
		{[]int{3, 4, 9}, "conv: a 5x5 kernel does not fit a 4x9 input"},
	} {
		_, err := l.Build(models.Build{Engine: e, Batch: 2, Params: pv, Grads: gv, In: tc.in})
		if err == nil || err.Error() != tc.want {
			t.Errorf("Build(In %v) = %v, want %q", tc.in, err, tc.want)
		}
	}
	_, err := l.Build(models.Build{Engine: e, Batch: 2, Params: pv[:1], Grads: gv[:1], In: []int{3, 8, 8}})
	if err == nil {
		t.Error("Build with one parameter view of two succeeded")
	}
}

// TestMaxPool2DGradients checks MaxPool2D with models/layertest: dx
// against central differences, on draws where no step of eps changes
// which element of a window is the largest.
func TestMaxPool2DGradients(t *testing.T) {
	const batch, c, h, w = 2, 3, 5, 6 // an odd height: the last row is dropped
	clearOfTies := func(_ [][]float32, x []float32) bool {
		for plane := range batch * c {
			p := x[plane*h*w:]
			for i := 0; i+1 < h; i += 2 {
				for j := 0; j+1 < w; j += 2 {
					v := []float32{p[i*w+j], p[i*w+j+1], p[(i+1)*w+j], p[(i+1)*w+j+1]}
					slices.Sort(v)
					if v[3]-v[2] < 3*layertest.DefaultEps {
						return false
					}
				}
			}
		}
		return true
	}
	n, err := layertest.Check(engines(t)[0], NewMaxPool2D(), batch, []int{c, h, w}, layertest.Options{Accept: clearOfTies})
	if err != nil {
		t.Fatal(err)
	}
	if n != batch*c*h*w {
		t.Errorf("checked %d elements, want %d", n, batch*c*h*w)
	}
}

// Every window routes its gradient to exactly one element; the dropped
// last row gets none.
func TestMaxPool2DRoutesGradient(t *testing.T) {
	const batch, c, h, w = 2, 3, 5, 6
	e := engines(t)[0]
	l := NewMaxPool2D()
	out, err := l.Build(models.Build{Engine: e, Batch: batch, In: []int{c, h, w}, NeedInputGrad: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, []int{c, 2, 3}) {
		t.Fatalf("output shape %v, want [3 2 3]", out)
	}
	x := e.Alloc(batch, c, h, w)
	uniform(rand.New(rand.NewPCG(4, 4)), compute.HostData(x))
	l.Forward(x)
	dy := e.Alloc(batch, c, 2, 3)
	for i := range compute.HostData(dy) {
		compute.HostData(dy)[i] = 1
	}
	nonzero := 0
	for i, g := range compute.HostData(l.Backward(dy)) {
		if g != 0 {
			nonzero++
		}
		if row := (i / w) % h; row == h-1 && g != 0 {
			t.Errorf("dx[%d] = %v in the dropped last row", i, g)
		}
	}
	if nonzero != batch*c*2*3 {
		t.Errorf("%d nonzero input gradients for %d outputs", nonzero, batch*c*2*3)
	}
}

func TestMaxPool2DForward(t *testing.T) {
	e := engines(t)[0]
	l := NewMaxPool2D()
	if _, err := l.Build(models.Build{Engine: e, Batch: 1, In: []int{1, 2, 4}}); err != nil {
		t.Fatal(err)
	}
	x := e.Alloc(1, 1, 2, 4)
	e.SetTensor(x, []float32{
		1, -2, 5, 5,
		3, 0, -1, 4,
	})
	y := l.Forward(x)
	if got := compute.HostData(y); !slices.Equal(got, []float32{3, 5}) {
		t.Errorf("y = %v, want [3 5]", got)
	}
	// Ties go to the first maximum of the window, in row-major order.
	if l.arg[1] != 2 {
		t.Errorf("argmax of the tied window = %d, want 2", l.arg[1])
	}
	if dx := l.Backward(e.Alloc(1, 1, 1, 2)); dx != nil {
		t.Errorf("Backward of a first layer returned %v, want nil", dx)
	}
}

func TestConvNetShapesAndRegistry(t *testing.T) {
	m, err := models.New("convnet", models.Config{Input: []int{784}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range m.Params() {
		got = append(got, fmt.Sprint(p.Name, p.Shape))
	}
	want := []string{
		"conv1.weight[8 1 3 3]", "conv1.bias[8]",
		"conv2.weight[16 8 3 3]", "conv2.bias[16]",
		"fc.weight[10 784]", "fc.bias[10]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("params %v, want %v", got, want)
	}
	if s := m.Data().Input; !slices.Equal(s, []int{1, 28, 28}) {
		t.Errorf("input shape %v, want [1 28 28]", s)
	}
	if _, err := models.New("convnet", models.Config{Input: []int{10}}); err == nil {
		t.Error("a 10-value input was accepted as an image")
	}
	if _, err := models.New("convnet", models.Config{Input: []int{1, 4, 4}, Hidden: []int{2, 2, 2}}); err == nil {
		t.Error("three poolings of a 4x4 image were accepted")
	}
}

// TestConvNetGradientThroughModel builds the whole model on arenas and checks the
// gradient of the loss with respect to a few parameters of every layer by
// finite differences: the layers compose.
func TestConvNetGradientThroughModel(t *testing.T) {
	e := engines(t)[0]
	const batch = 3
	m, err := NewConvNet(models.Config{Input: []int{1, 8, 8}, Classes: 4, Hidden: []int{3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	specs := m.Params()
	offsets, total := models.Layout(specs)
	params, grads := models.InitArena(specs, 3), make([]float32, total)
	var pv, gv []compute.Tensor
	for i, s := range specs {
		pv = append(pv, e.View(compute.HostArena(params), offsets[i], s.Shape...))
		gv = append(gv, e.View(compute.HostArena(grads), offsets[i], s.Shape...))
	}
	if err := m.Build(e, pv, gv, batch); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 8))
	x := e.Alloc(batch, 1, 8, 8)
	uniform(r, compute.HostData(x))
	labels := e.AllocLabels(batch)
	e.SetLabels(labels, []int32{0, 3, 1})
	stats := e.Alloc(3)
	in := models.Inputs{X: x, Targets: labels}
	loss := func() float64 {
		e.Zero(stats)
		m.Forward(in, 1, stats)
		return float64(compute.HostData(stats)[0])
	}
	loss()
	var ready []int
	m.Backward(func(first int) { ready = append(ready, first) })
	if !slices.Equal(ready, []int{4, 2, 0}) {
		t.Errorf("ready called with %v, want [4 2 0] (fc, conv2, conv1)", ready)
	}
	g := slices.Clone(grads)
	// A few elements of each parameter; ReLU kinks make a full check of a
	// composed model flaky, and the layers are checked in full above.
	const eps = 1e-3
	for i, s := range specs {
		for _, j := range []int{0, s.Size() / 2, s.Size() - 1} {
			at := offsets[i] + j
			orig := params[at]
			params[at] = orig + eps
			hi := loss()
			params[at] = orig - eps
			lo := loss()
			params[at] = orig
			fd := (hi - lo) / (2 * eps)
			if math.Abs(fd-float64(g[at])) > 2e-3+2e-2*math.Abs(fd) {
				t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", s.Name, j, g[at], fd)
			}
		}
	}
}
