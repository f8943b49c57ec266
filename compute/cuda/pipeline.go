package cuda

import (
	"errors"
	"fmt"
	"github.com/symddp/symddp/ddp/devicestep"
	"unsafe"

	"github.com/symddp/symddp/compute"
)

// Pipeline feeds training steps with batches through pinned host memory and
// the engine's copy stream, so that the copy of batch k+1 overlaps step k.
// It has two slots; step k uses slot k%2, and a slot's device tensors (X
// or Tokens, Y, Extra) are what the step reads (a captured graph per slot).
//
// The protocol of one step on slot s, and what each call waits for:
//
//  1. Fill(s): the host waits for the event "copied[s]" of the slot's
//     previous copy (two steps ago, long done): its pinned buffers are free.
//     The caller writes the batch into HostX (or HostTokens), HostY,
//     HostExtra.
//  2. Submit(s): the copy stream waits for "consumed[s]" (the step that read
//     the slot's device tensors two steps ago is done with them), copies
//     the pinned buffers to X (or Tokens), Y, Extra, and records
//     "copied[s]"; the compute stream waits for "copied[s]". Nothing waits
//     on the host.
//  3. The caller enqueues the step (eagerly, or Graph.Launch).
//  4. Release(s): the compute stream records "consumed[s]", copies the
//     report tensors (given to NewPipeline: control words, update status)
//     into the slot's pinned report, and records "reported[s]". A step
//     that calls StoreReport(s) as its last work (inside its graph) has
//     the device write the report itself; Release of such a slot only
//     records "consumed[s]", which then stands for "reported[s]" too.
//  5. Report(s), any time before the slot's next Release: the host waits
//     for "reported[s]" and reads the step's report.
//
// So the host runs ahead of the device by one step at most when it reads
// each report one step late, and no buffer is overwritten while a copy or a
// kernel may still read it.
type Pipeline struct {
	e       *Engine
	slots   [2]Slot
	outs    []*Tensor // the report's tensors
	outLen  int
	closed  bool
	created []uint64 // events to destroy
	pinned  []unsafe.Pointer
}

// Slot is one buffer of a Pipeline.
type Slot struct {
	// The device tensors a step reads: X (rows, sample...) for float
	// inputs or Tokens (rows·sample) for token ids, the other nil; Y
	// (rows·targets); Extra (extra words, nil when none).
	X      *Tensor
	Tokens *Labels
	Y      *Labels
	Extra  *Tensor
	// Pinned host memory for the next batch, laid out like the tensors
	// above (HostX or HostTokens, the other nil).
	HostX      []float32
	HostTokens []int32
	HostY      []int32
	HostExtra  []float32

	report                         []float32 // pinned
	copied, consumed, reported     uint64    // events
	repEv                          uint64    // the event Report waits for: reported, or consumed when the step stores the report
	copyPending, consPending, repd bool
	stores                         bool // the step writes the report (StoreReport)
}

// NewPipeline allocates two slots that hold what s describes (float inputs
// or token ids, s.Targets labels per row, s.Extra float32 words), and a
// report of the given device tensors (copied out after every step). Call it
// at build time.
func (e *Engine) NewPipeline(s devicestep.SlotSpec, report ...compute.Tensor) (*Pipeline, error) {
	rows, targets := s.Rows, max(s.Targets, 1)
	x := append([]int{rows}, s.Sample...)
	n := checkShape("NewPipeline", x)
	if s.Targets < 0 || s.Extra < 0 {
		panic(fmt.Sprintf("cuda: NewPipeline: %d targets per row and %d extra words", s.Targets, s.Extra))
	}
	p := &Pipeline{e: e}
	for _, t := range report {
		d := e.tensorOf("NewPipeline", t)
		p.outs = append(p.outs, d)
		p.outLen += d.size
	}
	for i := range p.slots {
		sl := &p.slots[i]
		var err error
		if s.Tokens {
			sl.Tokens = e.AllocLabels(n).(*Labels)
			sl.HostTokens, err = pinned[int32](p, n)
		} else {
			sl.X = e.Alloc(x...).(*Tensor)
			sl.HostX, err = pinned[float32](p, n)
		}
		if err != nil {
			return nil, errors.Join(err, p.Close())
		}
		sl.Y = e.AllocLabels(rows * targets).(*Labels)
		if sl.HostY, err = pinned[int32](p, rows*targets); err != nil {
			return nil, errors.Join(err, p.Close())
		}
		if s.Extra > 0 {
			sl.Extra = e.Alloc(s.Extra).(*Tensor)
			if sl.HostExtra, err = pinned[float32](p, s.Extra); err != nil {
				return nil, errors.Join(err, p.Close())
			}
		}
		if p.outLen > 0 {
			if sl.report, err = pinned[float32](p, p.outLen); err != nil {
				return nil, errors.Join(err, p.Close())
			}
		}
		for _, ev := range []*uint64{&sl.copied, &sl.consumed, &sl.reported} {
			if *ev, err = e.dev.EventCreate(); err != nil {
				return nil, errors.Join(fmt.Errorf("cuda: NewPipeline: %w", err), p.Close())
			}
			p.created = append(p.created, *ev)
		}
	}
	// The slots were zeroed on the compute stream; the copy stream must not
	// write them before that is done.
	if err := e.dev.Sync(e.timeout); err != nil {
		return nil, errors.Join(fmt.Errorf("cuda: NewPipeline: %w", err), p.Close())
	}
	return p, nil
}

// pinned allocates n elements of pinned host memory for p.
func pinned[T float32 | int32](p *Pipeline, n int) ([]T, error) {
	h, err := p.e.dev.HostAlloc(4 * n)
	if err != nil {
		return nil, fmt.Errorf("cuda: NewPipeline: %w", err)
	}
	p.pinned = append(p.pinned, h)
	return unsafe.Slice((*T)(h), n), nil
}

// Slot returns slot i (0 or 1).
func (p *Pipeline) Slot(i int) *Slot { return &p.slots[i] }

// Fill waits until slot i's pinned buffers may be written (step 1).
func (p *Pipeline) Fill(i int) error {
	s := &p.slots[i]
	if s.copyPending {
		if err := p.e.dev.EventSync(s.copied, p.e.timeout); err != nil {
			return p.fail("Fill", err)
		}
		s.copyPending = false
	}
	return nil
}

// Submit enqueues the copy of slot i's pinned buffers to its device
// tensors on the copy stream and makes the compute stream wait for it
// (step 2). The labels and token ids are also kept in the host copies of
// their Labels, as SetLabels keeps them, for SoftmaxCrossEntropy's checks.
func (p *Pipeline) Submit(i int) error {
	if p.e.capture.active {
		return errors.New("cuda: Pipeline.Submit while capturing a CUDA graph")
	}
	if p.e.err != nil {
		return p.e.err
	}
	s := &p.slots[i]
	d := p.e.dev
	var err error
	if s.consPending {
		err = d.WaitEvent(true, s.consumed)
	}
	if err == nil && s.X != nil {
		err = d.HtoD(true, s.X.ptr, unsafe.Pointer(unsafe.SliceData(s.HostX)), 4*len(s.HostX))
	} else if err == nil {
		err = d.HtoD(true, s.Tokens.ptr, unsafe.Pointer(unsafe.SliceData(s.HostTokens)), 4*len(s.HostTokens))
	}
	if err == nil {
		err = d.HtoD(true, s.Y.ptr, unsafe.Pointer(unsafe.SliceData(s.HostY)), 4*len(s.HostY))
	}
	if err == nil && s.Extra != nil {
		err = d.HtoD(true, s.Extra.ptr, unsafe.Pointer(unsafe.SliceData(s.HostExtra)), 4*len(s.HostExtra))
	}
	if err == nil {
		err = d.EventRecord(true, s.copied)
	}
	if err == nil {
		s.copyPending = true
		err = d.WaitEvent(false, s.copied)
	}
	if err != nil {
		return p.fail("Submit", err)
	}
	copy(s.Y.host, s.HostY)
	if s.Tokens != nil {
		copy(s.Tokens.host, s.HostTokens)
	}
	return nil
}

// StoreReport enqueues, on the stream, the device's own copy of the report
// tensors into slot i's pinned report: one small kernel per two tensors (no
// copy engine), so that a step can end with it inside its CUDA graph. Once a
// slot's report is stored this way, Release leaves the copy to the step.
// Copies on the stream between graphs cost the small mlp's step about 11 us
// of its 92 (H200, 2026-12-02: 2.77M samples/s with them, 3.13M without);
// its two report kernels inside the graph cost 3.3-3.6 us more (ddp's
// BenchmarkMLPStepGPU), which is why the tensors go two to a kernel.
func (p *Pipeline) StoreReport(i int) error {
	s := &p.slots[i]
	off := 0
	for k := 0; k < len(p.outs); k += 2 {
		a := p.outs[k]
		var src2 uintptr
		var n2 int
		if k+1 < len(p.outs) {
			src2, n2 = p.outs[k+1].ptr, p.outs[k+1].size
		}
		if err := p.e.dev.StoreHost(unsafe.Pointer(&s.report[off]), a.ptr, a.bytes(), src2, 4*n2); err != nil {
			return p.fail("StoreReport", err)
		}
		off += a.size + n2
	}
	s.stores = true
	return nil
}

// eachReport calls copyOut for every report tensor with its place in s's
// pinned report.
func (p *Pipeline) eachReport(s *Slot, copyOut func(dst unsafe.Pointer, src uintptr, bytes int) error) error {
	off := 0
	for _, t := range p.outs {
		if err := copyOut(unsafe.Pointer(&s.report[off]), t.ptr, t.bytes()); err != nil {
			return err
		}
		off += t.size
	}
	return nil
}

// Release marks the end of the step that read slot i and enqueues the copy
// of the report tensors into the slot's pinned report (step 4), unless the
// step stores it (StoreReport).
func (p *Pipeline) Release(i int) error {
	s := &p.slots[i]
	d := p.e.dev
	err := d.EventRecord(false, s.consumed)
	s.consPending = err == nil
	s.repEv = s.reported
	switch {
	case err != nil || p.outLen == 0:
	case s.stores:
		// the step wrote its report: the report is ready when the step is
		// done, so the host waits for "consumed" (an event less a step)
		s.repEv, s.repd = s.consumed, true
	default:
		err = p.eachReport(s, func(dst unsafe.Pointer, src uintptr, bytes int) error { return d.DtoH(false, dst, src, bytes) })
		if err == nil {
			err = d.EventRecord(false, s.reported)
			s.repd = err == nil
		}
	}
	if err != nil {
		return p.fail("Release", err)
	}
	return nil
}

// Report waits for slot i's report and returns it: the report tensors'
// values, back to back, as they were after the step. It stays valid until
// the slot's next Release.
func (p *Pipeline) Report(i int) ([]float32, error) {
	s := &p.slots[i]
	if s.repd {
		if err := p.e.dev.EventSync(s.repEv, p.e.timeout); err != nil {
			return nil, p.fail("Report", err)
		}
		s.repd = false
	}
	return s.report, nil
}

func (p *Pipeline) fail(op string, err error) error {
	p.e.fail("Pipeline."+op, err)
	if p.e.err != nil {
		return p.e.err
	}
	return fmt.Errorf("cuda: Pipeline.%s: %w", op, err)
}

// Close waits for the engine's streams and frees the pinned buffers and
// events (the device tensors belong to the engine's pool).
func (p *Pipeline) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	errs := []error{p.e.dev.Sync(p.e.timeout)}
	for i := range p.slots {
		s := &p.slots[i]
		if s.copyPending {
			errs = append(errs, p.e.dev.EventSync(s.copied, p.e.timeout))
		}
	}
	for _, ev := range p.created {
		errs = append(errs, p.e.dev.EventDestroy(ev))
	}
	for _, h := range p.pinned {
		errs = append(errs, p.e.dev.HostFree(h))
	}
	p.created, p.pinned = nil, nil
	return errors.Join(errs...)
}
