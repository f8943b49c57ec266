package ddp

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/symddp/symddp/internal/settings"
)

// The overlap trace, a debugging aid for the GPU check of the overlapped
// reduction (overlap.go): with SYMDDP_OVERLAP_TRACE=k, every recorded step
// stamps the GPU's clock (comm/nvshmem's TraceStamp: one thread writes
// %globaltimer into a slot, on the stream it is enqueued on, recorded in the
// step's graph like the rest) when the last micro-batch's backward starts,
// after each layer's backward (the model's ready callback), on the
// collectives stream before and after each bucket's reduction (the
// reduction's arrival barrier and kernel between them), and when backward
// ends. After step k the host waits for the step, reads the stamps and the
// engine's log (PE 0's, under train) says how many bucket reductions started
// and how many finished before backward ended: reductions that finished
// before then ran beside backward.

// OverlapTraceEnv names the variable that asks for the trace: the number of
// the step to report.
const OverlapTraceEnv = settings.OverlapTrace

// overlapTracer is implemented by comm backends that can stamp the GPU's
// clock on their streams (comm/nvshmem).
type overlapTracer interface {
	TraceStamp(onComm bool, slot int) error
	TraceRead(out []uint64) error
}

// traceSlots is the number of stamps a step may take (the library's slots).
const traceSlots = 4096

// traceMark is what one slot's stamp marks.
type traceMark struct {
	kind   byte // 's' backward starts, 'l' a layer's backward ends, 'b'/'e' a bucket's reduction begins/ends, 'E' backward ends
	bucket int  // the bucket's number in the step, for 'b' and 'e'
}

// overlapTrace stamps one step's events and reports them; a nil
// *overlapTrace stamps nothing.
type overlapTrace struct {
	tr      overlapTracer
	step    int // the step to report
	marks   []traceMark
	buckets int
	err     error
	stamps  []uint64
}

// setupTrace reads SYMDDP_OVERLAP_TRACE for g: a step number, or unset.
func (g *gpuSteps) setupTrace(t *Trainer) error {
	v := settings.Get(OverlapTraceEnv)
	if v == "" {
		return nil
	}
	step, err := strconv.Atoi(v)
	if err != nil || step < 1 {
		return fmt.Errorf("%s=%q: want the number of the step to trace (1, 2, ...)", OverlapTraceEnv, v)
	}
	tr, ok := t.c.(overlapTracer)
	switch {
	case g.ov == nil:
		g.e.Notice(OverlapTraceEnv + ": no overlapped reduction to trace (one PE, no bucket size, or buckets off)")
	case !ok:
		g.e.Notice(fmt.Sprintf("%s: the %s comm backend has no trace", OverlapTraceEnv, t.c.Backend()))
	default:
		g.ov.trace = &overlapTrace{tr: tr, step: step}
	}
	return nil
}

// reset starts a step's record: the slots are taken again from 0.
func (o *overlapTrace) reset() {
	if o != nil {
		o.marks, o.buckets, o.err = o.marks[:0], 0, nil
	}
}

// stamp enqueues the next slot's stamp for m, on the collectives stream when
// onComm.
func (o *overlapTrace) stamp(onComm bool, m traceMark) {
	if o == nil || o.err != nil {
		return
	}
	if len(o.marks) >= traceSlots {
		o.err = fmt.Errorf("more than %d stamps in a step", traceSlots)
		return
	}
	if err := o.tr.TraceStamp(onComm, len(o.marks)); err != nil {
		o.err = err
		return
	}
	o.marks = append(o.marks, m)
}

func (o *overlapTrace) start() { o.stamp(false, traceMark{kind: 's'}) }
func (o *overlapTrace) layer() { o.stamp(false, traceMark{kind: 'l'}) }
func (o *overlapTrace) end()   { o.stamp(false, traceMark{kind: 'E'}) }

// bucket stamps the collectives stream before (begin) or after a bucket's
// reduction.
func (o *overlapTrace) bucket(begin bool) {
	if o == nil {
		return
	}
	if begin {
		o.stamp(true, traceMark{kind: 'b', bucket: o.buckets})
		return
	}
	o.stamp(true, traceMark{kind: 'e', bucket: o.buckets})
	o.buckets++
}

// due reports whether step's trace is to be reported.
func (o *overlapTrace) due(step int) bool { return o != nil && o.step == step }

// report reads the stamps of the step just waited for and describes them.
func (o *overlapTrace) report(step int) string {
	head := fmt.Sprintf("overlap trace of step %d: ", step)
	if o.err != nil {
		return head + "no trace: " + o.err.Error()
	}
	if cap(o.stamps) < len(o.marks) {
		o.stamps = make([]uint64, len(o.marks))
	}
	st := o.stamps[:len(o.marks)]
	if err := o.tr.TraceRead(st); err != nil {
		return head + "no trace: " + err.Error()
	}
	return head + describeTrace(o.marks, st)
}

// describeTrace says, from a step's marks and their stamps (GPU clock,
// nanoseconds), how long backward took, how many layers it reported, and
// how many bucket reductions began and ended before it did, with each
// bucket's times from backward's start.
func describeTrace(marks []traceMark, stamps []uint64) string {
	var t0, tEnd uint64
	layers := 0
	for i, m := range marks {
		switch m.kind {
		case 's':
			t0 = stamps[i]
		case 'E':
			tEnd = stamps[i]
		case 'l':
			layers++
		}
	}
	us := func(t uint64) string { return strconv.FormatFloat(float64(int64(t-t0))/1e3, 'f', 1, 64) }
	var buckets []string
	n, began, ended := 0, 0, 0
	for i, m := range marks {
		switch m.kind {
		case 'b':
			n++
			if stamps[i] < tEnd {
				began++
			}
			buckets = append(buckets, fmt.Sprintf("%d: %s", m.bucket, us(stamps[i])))
		case 'e':
			if stamps[i] < tEnd {
				ended++
			}
			buckets[len(buckets)-1] += " to " + us(stamps[i])
		}
	}
	return fmt.Sprintf("backward %s us over %d layers; %d bucket reductions, %d began and %d ended before backward ended (us from backward's start: %s)",
		us(tEnd), layers, n, began, ended, strings.Join(buckets, ", "))
}
