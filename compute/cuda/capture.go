package cuda

import (
	"errors"
	"fmt"
	"github.com/symddp/symddp/ddp/devicestep"
	"math"
	"runtime"

	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/optim"
)

// Capturing a step. Between BeginCapture and EndCapture the engine's work is
// recorded into a CUDA graph instead of being run: the kernels, cuBLAS
// calls, copies and memsets of the calling goroutine (kept on one OS thread
// meanwhile), and anything else enqueued on the stream, such as the comm
// backend's allreduce kernels. Values that change from step to step are not
// frozen into the graph: SoftmaxCrossEntropy's scale and the optimizer's
// learning rate, bias corrections and step-1 flag are recorded as reads of
// the context's step block, and Graph.Launch hands each launch's values to
// those kernel nodes as arguments (the library rewrites the nodes'
// parameters before the launch; no kernel writes the block).
//
// Operations that need the host (SetTensor, SetLabels, ReadTensor,
// SumSquares, Sync) cannot be recorded: they fail the capture, and
// EndCapture returns the error. So does a second SoftmaxCrossEntropy with
// another scale, or a second optimizer update. Alloc and AllocLabels panic.

// captureState is what the engine knows about a capture in progress.
type captureState struct {
	active   bool
	err      error
	scale    float32 // the loss scale of the recorded SoftmaxCrossEntropy
	hasScale bool
	hyper    optim.Hyper // the recorded optimizer update
	updates  int
	// frozen: the recorded loss scale is a kernel argument (the bf16
	// classifier's, classifier.go), not a read of the step block, so every
	// launch must bring the same scale.
	frozen bool
}

func (c *captureState) fail(op string) {
	if c.err == nil {
		c.err = fmt.Errorf("cuda: %s needs the host and cannot be recorded in a CUDA graph", op)
	}
}

func (c *captureState) lossScale(s float32) {
	if c.hasScale && math.Float32bits(s) != math.Float32bits(c.scale) && c.err == nil {
		c.err = fmt.Errorf("cuda: SoftmaxCrossEntropy recorded with scales %g and %g: a captured step has one loss scale", c.scale, s)
	}
	c.scale, c.hasScale = s, true
}

// StepValues are the values one launch of a captured step brings
// (LossScale is SoftmaxCrossEntropy's scale).
type StepValues = devicestep.Values

// BeginCapture starts recording the engine's work into a CUDA graph. The
// calling goroutine stays on its OS thread until EndCapture.
func (e *Engine) BeginCapture() error {
	if e.capture.active {
		return errors.New("cuda: BeginCapture: a capture is already in progress")
	}
	if e.err != nil {
		return e.err
	}
	runtime.LockOSThread()
	if err := e.dev.CaptureBegin(); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("cuda: BeginCapture: %w", err)
	}
	e.capture = captureState{active: true}
	return nil
}

// Capturing reports whether a capture is in progress.
func (e *Engine) Capturing() bool { return e.capture.active }

// EndCapture ends the recording and returns the graph, or the error that
// made the step impossible to record (the engine then goes on eagerly).
func (e *Engine) EndCapture() (*Graph, error) {
	if !e.capture.active {
		return nil, errors.New("cuda: EndCapture without BeginCapture")
	}
	exec, err := e.dev.CaptureEnd()
	runtime.UnlockOSThread()
	st := e.capture
	e.capture = captureState{}
	if st.err == nil && st.updates > 1 {
		st.err = fmt.Errorf("cuda: %d optimizer updates recorded: a captured step has at most one", st.updates)
	}
	if st.err != nil {
		if err == nil {
			_ = e.dev.GraphDestroy(exec)
		}
		return nil, st.err
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: EndCapture: %w", err)
	}
	return &Graph{e: e, exec: exec, hyper: st.hyper, update: st.updates == 1, frozen: st.frozen, scale: st.scale}, nil
}

// Graph is a captured step, launched on the engine's stream.
type Graph struct {
	e      *Engine
	exec   uint64
	hyper  optim.Hyper
	update bool // an optimizer update was recorded
	frozen bool // scale is part of the graph (captureState.frozen)
	scale  float32
}

// Launch enqueues the graph with v's values (given to the kernels that
// read them) and returns at once.
func (g *Graph) Launch(v StepValues) error {
	if g.exec == 0 {
		return errors.New("cuda: Launch of a closed graph")
	}
	if g.frozen && math.Float32bits(v.LossScale) != math.Float32bits(g.scale) {
		return fmt.Errorf("cuda: Launch: loss scale %g, recorded with %g (the bf16 classifier holds it): %w", v.LossScale, g.scale, devicestep.ErrLossScale)
	}
	sv := cudalib.StepValues{LossScale: v.LossScale, Decay: 1}
	if g.update {
		if v.Step < 1 {
			return fmt.Errorf("cuda: Launch: optimizer step %d, steps count from 1", v.Step)
		}
		if !(v.LR >= 0) || math.IsInf(float64(v.LR), 1) {
			return fmt.Errorf("cuda: Launch: learning rate %g", v.LR)
		}
		sv = stepValues(g.hyper, v.Step, v.LR)
		sv.LossScale = v.LossScale
	}
	if g.e.err != nil {
		return g.e.err
	}
	if err := g.e.dev.GraphLaunch(g.exec, sv); err != nil {
		g.e.fail("Graph.Launch", err)
		return g.e.err
	}
	return nil
}

// Close releases the graph.
func (g *Graph) Close() error {
	if g.exec == 0 {
		return nil
	}
	err := g.e.dev.GraphDestroy(g.exec)
	g.exec = 0
	return err
}

// stepValues are the per-step values of optimizer step step with lr.
func stepValues(h optim.Hyper, step int, lr float32) cudalib.StepValues {
	sc := h.StepScalars(step, lr)
	return cudalib.StepValues{LR: sc.LR, StepSize: sc.StepSize, BC2Sqrt: sc.BC2Sqrt, Decay: sc.Decay, First: step == 1}
}
