package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/gradcheck"
)

// Central differences with eps = 1e-2 on float32 data of magnitude <= 1.
// Linear is linear in its parameters, so away from ReLU's kink the
// difference quotient is exact up to float32 rounding of the objective.
const (
	fdEps  = 1e-2
	fdAtol = 2e-4
	fdRtol = 2e-3
)

// minPreact is the smallest |x·Wᵀ + b| over the batch, in float64: when it
// exceeds the largest change one perturbation can cause, no element of the
// check crosses ReLU's kink.
func minPreact(x, w, b []float32, in, out int) float64 {
	m := math.Inf(1)
	for r := 0; r < len(x)/in; r++ {
		for o := 0; o < out; o++ {
			z := float64(b[o]) + gradcheck.Dot(x[r*in:(r+1)*in], w[o*in:(o+1)*in])
			m = math.Min(m, math.Abs(z))
		}
	}
	return m
}

func TestLinearGradients(t *testing.T) {
	const batch, in, out = 4, 6, 5
	for name, e := range gradcheck.Engines(t) {
		for _, act := range []compute.Activation{compute.Identity, compute.ReLU} {
			t.Run(fmt.Sprintf("%s/act=%d", name, act), func(t *testing.T) {
				l := NewLinear("fc", in, out, act)
				// Draw until no pre-activation lies within 3 eps of the kink
				// (a perturbation moves one by at most eps).
				var a *arenas
				var x compute.Tensor
				for seed := uint64(1); ; seed++ {
					r := rand.New(rand.NewPCG(seed, 1))
					a, x = newArenas(e, l.Params(), r), gradcheck.Uniform(e, r, batch, in)
					if act == compute.Identity || minPreact(compute.HostData(x), a.params[:out*in], a.params[out*in:], in, out) > 3*fdEps {
						break
					}
				}
				if _, err := l.Build(Build{Engine: e, Batch: batch, Params: a.pv, Grads: a.gv, In: []int{in}, NeedInputGrad: true}); err != nil {
					t.Fatal(err)
				}
				rr := rand.New(rand.NewPCG(99, 1))
				proj := make([]float32, batch*out) // the objective is sum(proj * y)
				for i := range proj {
					proj[i] = float32(2*rr.Float64() - 1)
				}
				f := func() float64 { return gradcheck.Dot(proj, compute.HostData(l.Forward(x))) }
				f()
				dy := e.Alloc(batch, out)
				e.SetTensor(dy, proj)
				dx := l.Backward(dy)
				dxv := append([]float32(nil), compute.HostData(dx)...)
				grads := append([]float32(nil), a.grads...)
				n := gradcheck.CheckFD(t, "dW", a.params[:out*in], grads[:out*in], f, fdEps, fdAtol, fdRtol)
				n += gradcheck.CheckFD(t, "db", a.params[out*in:], grads[out*in:], f, fdEps, fdAtol, fdRtol)
				n += gradcheck.CheckFD(t, "dx", compute.HostData(x), dxv, f, fdEps, fdAtol, fdRtol)
				if n != out*in+out+batch*in {
					t.Errorf("checked %d elements", n)
				}
			})
		}
	}
}

func TestLinearFirstLayerSkipsInputGradient(t *testing.T) {
	e := gradcheck.Engines(t)["gonum"]
	l := NewLinear("fc", 3, 2, compute.ReLU)
	a := newArenas(e, l.Params(), rand.New(rand.NewPCG(1, 1)))
	if _, err := l.Build(Build{Engine: e, Batch: 2, Params: a.pv, Grads: a.gv, In: []int{3}}); err != nil {
		t.Fatal(err)
	}
	l.Forward(e.Alloc(2, 3))
	if dx := l.Backward(e.Alloc(2, 2)); dx != nil {
		t.Errorf("Backward of a first layer returned %v, want nil", dx)
	}
}

func TestReLUGradients(t *testing.T) {
	const batch = 3
	in := []int{2, 4} // a rank-3 input: (B,2,4)
	for name, e := range gradcheck.Engines(t) {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 7))
			x := gradcheck.Uniform(e, r, batch, in[0], in[1])
			for i, v := range compute.HostData(x) { // keep clear of the kink
				if math.Abs(float64(v)) < 3*fdEps {
					compute.HostData(x)[i] = 0.5
				}
			}
			l := NewReLU()
			out, err := l.Build(Build{Engine: e, Batch: batch, In: in, NeedInputGrad: true})
			if err != nil || fmt.Sprint(out) != fmt.Sprint(in) {
				t.Fatalf("Build = %v, %v; want %v", out, err, in)
			}
			proj := compute.HostData(gradcheck.Uniform(e, r, batch*8, 1))
			f := func() float64 { return gradcheck.Dot(proj, compute.HostData(l.Forward(x))) }
			f()
			dy := e.Alloc(batch, in[0], in[1])
			e.SetTensor(dy, proj)
			dx := append([]float32(nil), compute.HostData(l.Backward(dy))...)
			gradcheck.CheckFD(t, "dx", compute.HostData(x), dx, f, fdEps, fdAtol, fdRtol)
		})
	}
}

func TestCrossEntropyGradients(t *testing.T) {
	const batch, classes, scale = 5, 4, 0.5
	labels := []int32{2, -1, 0, 3, -1}
	for name, e := range gradcheck.Engines(t) {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 3))
			logits := gradcheck.Uniform(e, r, batch, classes)
			for i := range compute.HostData(logits) {
				compute.HostData(logits)[i] *= 3
			}
			l := e.AllocLabels(batch)
			e.SetLabels(l, labels)
			ce := NewCrossEntropy(e, batch, classes)
			f := func() float64 {
				ce.Reset()
				ce.Apply(logits, l, scale)
				loss, _, _ := ce.Totals()
				return scale * loss
			}
			f()
			dl := append([]float32(nil), compute.HostData(ce.Apply(logits, l, scale))...)
			gradcheck.CheckFD(t, "dlogits", compute.HostData(logits), dl, f, 1e-2, 1e-4, 1e-2)
			for i, g := range dl {
				if labels[i/classes] == -1 && g != 0 {
					t.Errorf("dlogits[%d] = %v in a padding row", i, g)
				}
			}
			ce.Reset()
			ce.Apply(logits, l, scale)
			if _, _, labelled := ce.Totals(); labelled != 3 {
				t.Errorf("labelled = %d, want 3", labelled)
			}
		})
	}
}
