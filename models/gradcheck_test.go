package models

import (
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/gradcheck"
)

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
