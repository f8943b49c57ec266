package cuda

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/ddp/devicestep"
	"github.com/symddp/symddp/internal/cudalib"
)

// The engine offers the whole-step device path (devicestep.Engine), so
// that the trainer runs it without knowing this package.
var _ devicestep.Engine = (*Engine)(nil)

// StepGraphs reports whether steps may be captured (GraphsEnabled).
func (e *Engine) StepGraphs() bool { return e.GraphsEnabled() }

// StatusSkipped is the index of the status word that says a step's update
// was skipped.
func (e *Engine) StatusSkipped() int { return cudalib.StatusSkipped }

// NewStepPipeline is NewPipeline as a devicestep.Pipeline.
// The slot's absent tensors stay nil interfaces (not typed nil pointers).
func (e *Engine) NewStepPipeline(spec devicestep.SlotSpec, report ...compute.Tensor) (devicestep.Pipeline, error) {
	p, err := e.NewPipeline(spec, report...)
	if err != nil {
		return nil, err
	}
	sp := &stepPipeline{Pipeline: p}
	for i := range sp.slots {
		s := p.Slot(i)
		sp.slots[i] = devicestep.Slot{Y: s.Y, HostX: s.HostX, HostTokens: s.HostTokens, HostY: s.HostY, HostExtra: s.HostExtra}
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

// stepPipeline is a Pipeline seen through devicestep.Pipeline.
type stepPipeline struct {
	*Pipeline
	slots [2]devicestep.Slot
}

func (p *stepPipeline) Slot(i int) *devicestep.Slot { return &p.slots[i] }

// EndStepCapture is EndCapture as a devicestep.Graph.
func (e *Engine) EndStepCapture() (devicestep.Graph, error) {
	g, err := e.EndCapture()
	if g == nil {
		return nil, err
	}
	return g, err
}
