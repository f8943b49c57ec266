package cuda_test

import (
	"fmt"
	"github.com/symddp/symddp/ddp/devicestep"
	"strings"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
)

// A token slot carries int32 token ids and per-position targets to the
// device, and the host copies that SoftmaxCrossEntropy checks follow every
// submitted batch.
func TestPipelineTokensGPU(t *testing.T) { testPipelineTokens(t, gpuEngine(t)) }
func TestPipelineTokensEmulated(t *testing.T) {
	testPipelineTokens(t, cudatest.NewEmulated(cuda.Options{}))
}

func testPipelineTokens(t *testing.T, e *cuda.Engine) {
	const rows, T, C = 2, 3, 8
	p, err := e.NewStepPipeline(devicestep.SlotSpec{Rows: rows, Sample: []int{T}, Tokens: true, Targets: T, Extra: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}()
	for i := range 2 {
		s := p.Slot(i)
		if s.X != nil || s.HostX != nil || s.Tokens == nil || s.Tokens.Len() != rows*T || len(s.HostTokens) != rows*T ||
			s.Y.Len() != rows*T || len(s.HostY) != rows*T || len(s.HostExtra) != 1 {
			t.Fatalf("slot %d: X %v, %d host floats, %d tokens (%d pinned), %d targets (%d pinned), %d extra; want tokens and targets of %d",
				i, s.X, len(s.HostX), s.Tokens.Len(), len(s.HostTokens), s.Y.Len(), len(s.HostY), len(s.HostExtra), rows*T)
		}
	}
	logits, dl, stats := e.Alloc(rows*T, C), e.Alloc(rows*T, C), e.Alloc(3)
	e.Zero(logits)
	// Four steps over the two slots, each with its own batch.
	for step := range 4 {
		slot := step % 2
		if err := p.Fill(slot); err != nil {
			t.Fatal(err)
		}
		s := p.Slot(slot)
		for k := range s.HostTokens {
			s.HostTokens[k] = int32((k + 3*step) % C)
			s.HostY[k] = int32((k + 5*step + 1) % C)
		}
		s.HostY[step] = -1
		want := [2][]int32{append([]int32(nil), s.HostTokens...), append([]int32(nil), s.HostY...)}
		if err := p.Submit(slot); err != nil {
			t.Fatal(err)
		}
		for j, lab := range []compute.Labels{s.Tokens, s.Y} {
			// Zero logits: dlogits is 1/C, less 1 at the label's column.
			e.SoftmaxCrossEntropy(logits, lab, dl, 1, stats)
			got := make([]float32, rows*T*C)
			e.ReadTensor(got, dl)
			for r, y := range want[j] {
				for c := range C {
					w := float32(1) / C
					if y == -1 {
						w = 0
					} else if int32(c) == y {
						w -= 1
					}
					if got[r*C+c] != w {
						t.Fatalf("step %d, labels %d: dlogits[%d,%d] = %v, want %v (labels %v)", step, j, r, c, got[r*C+c], w, want[j])
					}
				}
			}
		}
		if err := p.Release(slot); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Report(slot); err != nil {
			t.Fatal(err)
		}
	}
	// A submitted token outside the logits' classes is caught on the host.
	if err := p.Fill(0); err != nil {
		t.Fatal(err)
	}
	s := p.Slot(0)
	clear(s.HostY)
	for k := range s.HostTokens {
		s.HostTokens[k] = int32(k + 3) // rows 5.. are outside C-3 classes
	}
	if err := p.Submit(0); err != nil {
		t.Fatal(err)
	}
	narrow, dn := e.View(arenaOf(logits), 0, rows*T, C-3), e.View(arenaOf(dl), 0, rows*T, C-3)
	msg := panicOf(func() { e.SoftmaxCrossEntropy(narrow, s.Tokens, dn, 1, stats) })
	if !strings.Contains(msg, "row 2 has label 5") {
		t.Errorf("SoftmaxCrossEntropy over a submitted token 5 of %d classes: panic %q, want one naming row 2", C-3, msg)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
}

// A float slot is as it was: inputs (rows, sample...) and a label per row,
// no token room.
func TestPipelineFloatEmulated(t *testing.T) {
	e := cudatest.NewEmulated(cuda.Options{})
	p, err := e.NewStepPipeline(devicestep.SlotSpec{Rows: 3, Sample: []int{2, 2}, Extra: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := p.Slot(1)
	if s.Tokens != nil || s.HostTokens != nil || s.X == nil || s.X.Shape().String() != "(3, 2, 2)" || s.Y.Len() != 3 || len(s.HostY) != 3 {
		t.Fatalf("float slot: tokens %v (%d pinned), X %v, %d labels", s.Tokens, len(s.HostTokens), s.X, s.Y.Len())
	}
	if err := p.Fill(1); err != nil {
		t.Fatal(err)
	}
	for k := range s.HostX {
		s.HostX[k] = float32(k) / 4
	}
	if err := p.Submit(1); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 12)
	e.ReadTensor(got, s.X)
	if fmt.Sprint(got) != fmt.Sprint(s.HostX) {
		t.Errorf("X on the device %v, want %v", got, s.HostX)
	}
}

// arenaOf is a device tensor's memory as an arena, to view part of it.
func arenaOf(x compute.Tensor) compute.Arena {
	d := x.(*cuda.Tensor)
	return compute.Arena{Dev: d.DevicePtr(), N: d.Size()}
}

// panicOf runs f and returns what it panicked with ("" when it did not).
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// A slot's report holds the report tensors as they were after the step:
// copied by Release, or written by the step itself (StoreReport, here
// inside a captured graph) and then left alone by Release.
func TestPipelineReportGPU(t *testing.T) { testPipelineReport(t, gpuEngine(t)) }
func TestPipelineReportEmulated(t *testing.T) {
	testPipelineReport(t, cudatest.NewEmulated(cuda.Options{}))
}

func testPipelineReport(t *testing.T, e *cuda.Engine) {
	ctrl, status := e.Alloc(3), e.Alloc(2)
	p, err := e.NewStepPipeline(devicestep.SlotSpec{Rows: 1, Sample: []int{1}}, ctrl, status)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	set := func(v float32) {
		e.SetTensor(ctrl, []float32{v, v + 1, v + 2})
		e.SetTensor(status, []float32{-v, -v - 1})
	}
	report := func(slot int) string {
		if err := p.Release(slot); err != nil {
			t.Fatal(err)
		}
		r, err := p.Report(slot)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(r)
	}
	set(1)
	if got, want := report(0), "[1 2 3 -1 -2]"; got != want {
		t.Errorf("report copied by Release: %s, want %s", got, want)
	}
	// slot 1's step ends with the device's own copy, recorded in a graph
	if err := e.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := p.StoreReport(1); err != nil {
		t.Fatal(err)
	}
	g, err := e.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	set(5) // after the capture: the launch copies what the tensors hold then
	if err := g.Launch(devicestep.Values{}); err != nil {
		t.Fatal(err)
	}
	if got, want := report(1), "[5 6 7 -5 -6]"; got != want {
		t.Errorf("report stored by the step's graph: %s, want %s", got, want)
	}
	// after the step, the tensors change; Release must not copy them over
	// the stored report
	set(9)
	if got, want := report(1), "[5 6 7 -5 -6]"; got != want {
		t.Errorf("report of a storing slot after Release: %s, want %s (Release copied again)", got, want)
	}
	if got, want := report(0), "[9 10 11 -9 -10]"; got != want {
		t.Errorf("report of the other slot: %s, want %s", got, want)
	}
	// three report tensors: two to a store kernel, then the third alone
	a, b, c := e.Alloc(1), e.Alloc(2), e.Alloc(1)
	p3, err := e.NewStepPipeline(devicestep.SlotSpec{Rows: 1, Sample: []int{1}}, a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	defer p3.Close()
	e.SetTensor(a, []float32{1})
	e.SetTensor(b, []float32{2, 3})
	e.SetTensor(c, []float32{4})
	if err := p3.StoreReport(0); err != nil {
		t.Fatal(err)
	}
	if err := p3.Release(0); err != nil {
		t.Fatal(err)
	}
	r, err := p3.Report(0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(r), "[1 2 3 4]"; got != want {
		t.Errorf("report of three tensors stored by the step: %s, want %s", got, want)
	}
}
