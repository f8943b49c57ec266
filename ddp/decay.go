package ddp

import (
	"fmt"
	"github.com/symddp/symddp/ddp/devicestep"

	"github.com/symddp/symddp/optim"
)

// Weight decay on some parameters only. A model exempts parameters from
// weight decay with ParamSpec.NoDecay (a GPT's biases and norms). When it
// does and the optimizer decays, the trainer runs the
// update over runs of the arena: the optimizer itself where parameters
// decay, and the same optimizer with weight decay 0 where they do not. A
// model without NoDecay parameters gets the one update over the whole
// arena, as before. The exempt runs' optimizer is the registry's one of the
// same Hyper().Kind with WeightDecay 0 (optim.New), so an optimizer of
// one's own should be registered under its Kind to take part. The device
// update (devicestep.Engine) gets the exempt runs as a mask
// (devicestep.DecayExempter, deviceExempt); an engine without one refuses a
// model with exempt parameters unless the weight decay is 0.

// updateSeg is a run [lo, hi) of the arena whose parameters all decay or
// all do not, with its views of the state slots (made once).
type updateSeg struct {
	lo, hi int
	exempt bool // o is the optimizer without weight decay
	o      optim.Optimizer
	state  [][]float32
}

// planDecay returns the optimizer of the parameters that do not decay, or
// nil when every parameter is updated by t.o.
func (t *Trainer) planDecay() (optim.Optimizer, error) {
	h := t.o.Hyper()
	if h.WeightDecay == 0 {
		return nil, nil
	}
	any := false
	for _, s := range t.specs {
		any = any || s.NoDecay
	}
	if !any {
		return nil, nil
	}
	h.WeightDecay = 0
	o, err := optim.New(h.Kind, h.Config)
	if err != nil {
		return nil, fmt.Errorf("optimizer %s without weight decay for the exempt parameters: %w", t.o.Name(), err)
	}
	return o, nil
}

// segments splits [lo, hi) of the arena into runs of decaying and exempt
// parameters, each with views of state (slices as long as [lo, hi)). With
// no exempt optimizer it is the one run.
func (t *Trainer) segments(noDecay optim.Optimizer, lo, hi int, state [][]float32) []updateSeg {
	if noDecay == nil {
		return []updateSeg{{lo: lo, hi: hi, o: t.o, state: state}}
	}
	var segs []updateSeg
	for i, s := range t.specs {
		a, b := max(lo, t.offsets[i]), min(hi, t.offsets[i]+s.Size())
		if a >= b {
			continue
		}
		o := t.o
		if s.NoDecay {
			o = noDecay
		}
		if n := len(segs); n > 0 && segs[n-1].exempt == s.NoDecay && segs[n-1].hi == a {
			segs[n-1].hi = b
			continue
		}
		segs = append(segs, updateSeg{lo: a, hi: b, exempt: s.NoDecay, o: o})
	}
	for k := range segs {
		segs[k].state = make([][]float32, len(state))
		for j, st := range state {
			segs[k].state[j] = st[segs[k].lo-lo : segs[k].hi-lo : segs[k].hi-lo]
		}
	}
	return segs
}

// deviceExempt hands the exempt runs of t.segs to a device engine's
// update (devicestep.DecayExempter), which then runs them without weight
// decay as applyUpdate does on the host.
func (t *Trainer) deviceExempt() error {
	ex, ok := t.e.(devicestep.DecayExempter)
	if !ok {
		return fmt.Errorf("model %s exempts some parameters from weight decay (ParamSpec.NoDecay), which the %s engine's device update does not do: set the weight decay to 0 or train on the CPU",
			t.m.Name(), t.e.Name())
	}
	var spans [][2]int
	for _, s := range t.segs {
		if s.exempt {
			spans = append(spans, [2]int{s.lo, s.hi})
		}
	}
	return ex.SetDecayExempt(t.n, spans)
}

// applyUpdate runs the optimizer over segs: params and grads are the arena
// slices that start at segs' base lo.
func applyUpdate(segs []updateSeg, base int, params, grads []float32, step int, lr float32) {
	for _, s := range segs {
		a, b := s.lo-base, s.hi-base
		s.o.Update(params[a:b:b], grads[a:b:b], s.state, step, lr)
	}
}
