package ddp

import (
	"fmt"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/datasets"
)

// Evaluate runs the model over ds (its first Options.EvalLimit samples when
// that is set), sharded across PEs in dataset order (rows past the end are
// padding), and returns the loss and accuracy over those samples (targets),
// reduced across PEs. It is collective.
func (t *Trainer) Evaluate(ds datasets.Source) (Metrics, error) {
	t.mustBeOpen()
	if err := t.checkDataset("evaluation", ds); err != nil {
		return Metrics{}, err
	}
	e := t.e
	e.Zero(t.estats)
	P, me := t.c.NPEs(), t.c.MyPE()
	rowsPerStep := t.micro * P
	n := ds.Len()
	if t.opts.EvalLimit > 0 && t.opts.EvalLimit < n {
		n = t.opts.EvalLimit
	}
	steps := (n + rowsPerStep - 1) / rowsPerStep
	idx := t.idx[:t.micro]
	for s := 0; s < steps; s++ {
		for j := range idx {
			pos := s*rowsPerStep + me*t.micro + j
			if pos < n {
				idx[j] = pos
			} else {
				idx[j] = -1
			}
		}
		t.load(ds, idx)
		t.m.Forward(t.in, 0, t.estats)
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
func (t *Trainer) checkDataset(what string, ds datasets.Source) error {
	if ds == nil || ds.Len() == 0 {
		return fmt.Errorf("%s dataset is empty", what)
	}
	got, want := ds.Spec(), t.spec
	kind := func(s datasets.Spec) string {
		if s.Tokens {
			return "token windows"
		}
		return "samples"
	}
	switch {
	case got.Tokens != want.Tokens || got.InputSize() != want.InputSize():
		return fmt.Errorf("%s dataset has %s of shape %v (%d values) but model %s takes %s of shape %v (%d values)",
			what, kind(got), got.Input, got.InputSize(), t.m.Name(), kind(want), want.Input, want.InputSize())
	case got.Targets != want.Targets:
		return fmt.Errorf("%s dataset has %d targets per sample but model %s wants %d", what, got.Targets, t.m.Name(), want.Targets)
	case got.Classes > want.Classes:
		if want.Tokens {
			return fmt.Errorf("%s dataset has a vocabulary of %d tokens but model %s has %d", what, got.Classes, t.m.Name(), want.Classes)
		}
		return fmt.Errorf("%s dataset has %d classes but model %s has %d outputs", what, got.Classes, t.m.Name(), want.Classes)
	}
	return nil
}
