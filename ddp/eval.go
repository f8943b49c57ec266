package ddp

import (
	"fmt"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/datasets"
)

// Evaluate runs the model over ds, sharded across PEs in dataset order
// (rows past the end are padding), and returns the loss and accuracy over
// every sample, reduced across PEs. It is collective.
func (t *Trainer) Evaluate(ds datasets.Dataset) (Metrics, error) {
	if err := t.checkDataset("evaluation", ds); err != nil {
		return Metrics{}, err
	}
	e := t.e
	e.Zero(t.estats)
	P, me := t.c.NPEs(), t.c.MyPE()
	rowsPerStep := t.micro * P
	steps := (ds.Len() + rowsPerStep - 1) / rowsPerStep
	idx := t.idx[:t.micro]
	host := t.pArena.Host != nil
	for s := 0; s < steps; s++ {
		for j := range idx {
			pos := s*rowsPerStep + me*t.micro + j
			if pos < ds.Len() {
				idx[j] = pos
			} else {
				idx[j] = -1
			}
		}
		ds.Gather(idx, t.xHost, t.yHost)
		if !host {
			e.SetTensor(t.x, t.xHost)
		}
		e.SetLabels(t.y, t.yHost)
		logits := t.m.Forward(t.x)
		e.SoftmaxCrossEntropy(logits, t.y, t.dlogits, 0, t.estats)
	}
	var s [3]float32
	e.ReadTensor(s[:], t.estats)
	sum, err := t.reduceMetrics(s)
	if err != nil {
		return Metrics{}, fmt.Errorf("evaluate: %w", err)
	}
	return metricsOf(sum), nil
}

// reduceMetrics sums (loss sum, correct, labelled) over PEs.
func (t *Trainer) reduceMetrics(s [3]float32) ([3]float32, error) {
	me := t.c.MyPE()
	if err := t.c.PutFloat32(t.metrics, 0, s[:], me); err != nil {
		return s, err
	}
	if err := t.c.AllReduce(t.metrics, 0, 3, comm.Sum); err != nil {
		return s, err
	}
	var out [3]float32
	if err := t.c.GetFloat32(out[:], t.metrics, 0, me); err != nil {
		return s, err
	}
	return out, nil
}

func metricsOf(s [3]float32) Metrics {
	m := Metrics{Samples: int(s[2])}
	if s[2] > 0 {
		m.Loss = float64(s[0]) / float64(s[2])
		m.Accuracy = float64(s[1]) / float64(s[2])
	}
	return m
}

// checkDataset verifies that ds fits the model.
func (t *Trainer) checkDataset(what string, ds datasets.Dataset) error {
	if ds == nil || ds.Len() == 0 {
		return fmt.Errorf("%s dataset is empty", what)
	}
	want, got := 1, 1
	for _, d := range t.m.InputShape() {
		want *= d
	}
	for _, d := range ds.SampleShape() {
		got *= d
	}
	if want != got {
		return fmt.Errorf("%s dataset has samples of shape %v (%d values) but model %s takes %v (%d values)",
			what, ds.SampleShape(), got, t.m.Name(), t.m.InputShape(), want)
	}
	if ds.Classes() > t.m.Classes() {
		return fmt.Errorf("%s dataset has %d classes but model %s has %d outputs", what, ds.Classes(), t.m.Name(), t.m.Classes())
	}
	return nil
}
