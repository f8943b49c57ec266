package cuda

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"
)

// The engine offers the whole-step device path (compute.DeviceSteps), so
// that the trainer runs it without knowing this package.
var _ compute.DeviceSteps = (*Engine)(nil)

// StepGraphs reports whether steps may be captured (GraphsEnabled).
func (e *Engine) StepGraphs() bool { return e.GraphsEnabled() }

// StatusSkipped is the index of the status word that says a step's update
// was skipped.
func (e *Engine) StatusSkipped() int { return cudalib.StatusSkipped }

// NewStepPipeline is NewPipeline as a compute.StepPipeline.
// The slot's absent tensors stay nil interfaces (not typed nil pointers).
func (e *Engine) NewStepPipeline(spec compute.SlotSpec, report ...compute.Tensor) (compute.StepPipeline, error) {
	p, err := e.NewPipeline(spec, report...)
	if err != nil {
		return nil, err
	}
	sp := &stepPipeline{Pipeline: p}
	for i := range sp.slots {
		s := p.Slot(i)
		sp.slots[i] = compute.StepSlot{Y: s.Y, HostX: s.HostX, HostTokens: s.HostTokens, HostY: s.HostY, HostExtra: s.HostExtra}
		if s.X != nil {
			sp.slots[i].X = s.X
		}
		if s.Tokens != nil {
			sp.slots[i].Tokens = s.Tokens
		}
		if s.Extra != nil {
			sp.slots[i].Extra = s.Extra
		}
	}
	return sp, nil
}

// stepPipeline is a Pipeline seen through compute.StepPipeline.
type stepPipeline struct {
	*Pipeline
	slots [2]compute.StepSlot
}

func (p *stepPipeline) Slot(i int) *compute.StepSlot { return &p.slots[i] }

// EndStepCapture is EndCapture as a compute.StepGraph.
func (e *Engine) EndStepCapture() (compute.StepGraph, error) {
	g, err := e.EndCapture()
	if g == nil {
		return nil, err
	}
	return g, err
}
