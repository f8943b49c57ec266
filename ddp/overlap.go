package ddp

import (
	"errors"
	"fmt"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/units"
)

// Gradient reduction overlapped with backward on the device step path
// (issue 38). With a bucket size (Options.BucketBytes > 0) and a comm
// backend with a collectives stream (commForker: comm/nvshmem), the last
// micro-batch's backward reports each finished layer (the model's ready
// callback, as on the host path), and as soon as a bucket's worth of
// gradients is final the step enqueues, on the compute stream, what the
// bucket needs first (the accumulated micro-batches folded in, the rounding
// to bf16 for a bf16 reduction), then CommFork and the bucket's reduction:
// an allreduce of its part of the arena (replicated), or the reduce-scatter
// of that part onto the owners of its shards (sharded, ZeRO-1). CommFork
// orders the library's collectives stream after the compute stream's work so
// far, so the reduction runs there while the compute stream goes on with
// the layers before the bucket. After backward the rest (the first bucket)
// is reduced likewise, then the control words (with the bf16 or the sharded
// reduction; in fp32 replicated they ride along with the last layers'
// bucket), and CommJoin makes the compute stream wait for all of it before
// the bf16 gradients are widened back and the optimizer runs. All of it is
// recorded into the step's CUDA graph like the rest of the step, and runs
// the same eagerly.
//
// The bits do not depend on the buckets: every element is reduced by the
// same PE-order fold wherever its bucket's boundaries fall, the folding of
// the micro-batches and the bf16 rounding are elementwise, and the
// reduce-scatter of a part leaves each PE's piece the bits of the whole
// reduce-scatter. Why the collectives stream cannot hang where an earlier
// second stream did (8 PEs sharing a GPU under MPS): cuda/sd_overlap.cu.
//
// The default (Options.BucketBytes left 0) is DefaultDeviceBucketBytes
// where the backend says that each PE has a GPU of its own
// (comm.DeviceSharer), one reduction after backward where PEs share a GPU
// or the backend does not say. On a shared GPU the reduction runs on the
// SMs that backward needs, so there is nothing to overlap: 8 PEs sharing an
// H100 under MPS trained GPT-2 124M about 12% slower with 25 MiB buckets
// than with one reduction after backward (docs/GPU.md). There, in bf16, the
// overlapped reduction also needs the GEMMs' thread-block clusters limited
// to one block (shareGPU): with larger clusters it hung (docs/GPU.md,
// "Reducing gradients while backward runs").

// DefaultDeviceBucketBytes is the device step path's gradient bucket when
// Options.BucketBytes is left 0 and each PE has a GPU of its own (the size
// PyTorch DDP's buckets default to).
const DefaultDeviceBucketBytes = 25 << 20

// defaultDeviceBucket is the device path's bucket in elements when the
// options leave it 0: DefaultDeviceBucketBytes' worth where c says that no
// two PEs share a GPU; none otherwise, with why.
func defaultDeviceBucket(c comm.Comm) (int, string) {
	ds, ok := c.(comm.DeviceSharer)
	switch {
	case c.NPEs() == 1:
		return 0, ""
	case !ok:
		return 0, fmt.Sprintf("the %s backend does not say whether PEs share a GPU", c.Backend())
	case ds.SharesDevice():
		return 0, "PEs share a GPU, whose SMs bucket reductions would take from backward"
	}
	return DefaultDeviceBucketBytes / 4, ""
}

// commForker is implemented by comm backends with a collectives stream
// (comm/nvshmem): between CommFork and CommJoin the Enqueue collectives run
// on it, beside the compute stream.
type commForker interface {
	CommFork() error
	CommJoin() error
}

// partReduceScatterer is implemented by comm backends that enqueue the
// reduce-scatter of part [lo, hi) of elements [off, off+n) of a buffer
// without an event (comm/nvshmem), as IReduceScatter does with one.
type partReduceScatterer interface {
	ReduceScatterPartEnqueue(b comm.Buffer, off, n, lo, hi int, op comm.Op) error
}

// devicePointer is a tensor in device memory that tells its address (the
// CUDA engine's), for views into a whole-arena tensor such as the
// gradient accumulator.
type devicePointer interface {
	DevicePtr() uintptr
}

// deviceOverlap is the state of the overlapped reduction (nil on the device
// path that reduces once after backward).
type deviceOverlap struct {
	t       *Trainer
	f       commForker
	ar      enqueueAllReducer
	rs      partReduceScatterer // the sharded update's; nil when replicated
	bucket  int                 // elements per bucket
	pending int                 // elements [0, pending) are not issued yet
	forked  bool                // CommFork enqueued since the last CommJoin
	err     error               // the first failure while issuing (ready cannot return one)
	readyFn func(first int)
	trace   *overlapTrace // nil unless SYMDDP_OVERLAP_TRACE asks for one
}

// newDeviceOverlap sets up the overlapped reduction for t's device step
// path when it has a bucket size (asked for or the default) and several PEs
// and the backend and the engine allow it; nil otherwise, with why (the
// caller says it when the bucket size was asked for, not the default).
func (t *Trainer) newDeviceOverlap(ar enqueueAllReducer) (*deviceOverlap, string) {
	if t.deviceBucket <= 0 || ar == nil {
		return nil, ""
	}
	if off := t.deviceOverlapOff(); off != "" {
		return nil, off
	}
	o := &deviceOverlap{t: t, f: t.c.(commForker), ar: ar, bucket: t.deviceBucket}
	if t.dshard != nil {
		o.rs = t.c.(partReduceScatterer)
	}
	o.readyFn = o.ready
	return o, ""
}

// deviceOverlapOff is why the backend or the engine cannot reduce t's
// gradients in buckets during backward on the device step path; "" when
// they can.
func (t *Trainer) deviceOverlapOff() string {
	if _, ok := t.c.(commForker); !ok {
		return fmt.Sprintf("the %s comm backend has no collectives stream", t.c.Backend())
	}
	if fo, ok := t.c.(comm.FixedOrderer); ok && !fo.FixedOrder() {
		return "some PE is not reachable by pointer (the collectives stream needs every peer)"
	}
	if _, ok := t.c.(partReduceScatterer); t.dshard != nil && !ok {
		return fmt.Sprintf("the %s comm backend cannot enqueue the reduce-scatter of part of the arena", t.c.Backend())
	}
	if t.acc != nil && t.accArena.Dev == 0 {
		return fmt.Sprintf("the %s engine's gradient accumulator has no device address", t.e.Name())
	}
	return ""
}

// gpuSharer is an engine that is told, before Build, that other PEs'
// kernels share its GPU while gradient buckets are reduced during backward
// (compute/cuda's: its bf16 GEMMs then take one-block thread-block
// clusters). It returns what it did, for the reduction's line.
type gpuSharer interface {
	ShareGPU() (string, error)
}

// shareGPU tells the engine, before Build, when t reduces buckets during
// backward on PEs that share a GPU (an explicit bucket size there: the
// default is none).
func (t *Trainer) shareGPU() error {
	ds, ok := t.c.(comm.DeviceSharer)
	gs, engine := t.e.(gpuSharer)
	if t.deviceBucket <= 0 || !ok || !engine || !ds.SharesDevice() {
		return nil
	}
	did, err := gs.ShareGPU()
	if err != nil {
		return fmt.Errorf("PEs share a GPU and reduce gradient buckets during backward: %w", err)
	}
	t.sharedGPU = did
	return nil
}

// reduction says how t reduces the gradients of a step (StartInfo's
// Reduction); "" with one PE.
func (t *Trainer) reduction() string {
	if t.c.NPEs() == 1 {
		return ""
	}
	what := "allreduce"
	if t.ShardedUpdate() {
		what = "reduce-scatter"
	}
	if _, ok := t.strat.(*deviceStrategy); ok {
		switch off := t.deviceOverlapOff(); {
		case t.deviceBucket > 0 && off == "" && t.sharedGPU != "":
			return fmt.Sprintf("%s of %s buckets on the collectives stream during backward (PEs share a GPU: %s)", what,
				units.Bytes(int64(4*t.deviceBucket)), t.sharedGPU)
		case t.deviceBucket > 0 && off == "":
			return fmt.Sprintf("%s of %s buckets on the collectives stream during backward", what, units.Bytes(int64(4*t.deviceBucket)))
		case t.deviceBucket > 0:
			return fmt.Sprintf("one %s after backward (buckets off: %s)", what, off)
		case t.bucketWhy != "":
			return fmt.Sprintf("one %s after backward (%s)", what, t.bucketWhy)
		}
		return fmt.Sprintf("one %s after backward", what)
	}
	if t.bucketElems >= t.n {
		return fmt.Sprintf("one %s after backward", what)
	}
	return fmt.Sprintf("%s of %s buckets, each started as backward finishes it", what, units.Bytes(int64(4*t.bucketElems)))
}

// top is the end of the elements the buckets reduce: the gradients and, in
// fp32 replicated, the control words after them (the bf16 and the sharded
// reductions reduce those apart, in finish).
func (o *deviceOverlap) top() int {
	if o.t.bf16 != nil || o.t.dshard != nil {
		return o.t.n
	}
	return o.t.n + ctrlWords
}

// begin readies a step's last micro-batch's backward: nothing issued yet.
func (o *deviceOverlap) begin() {
	o.pending, o.err = o.top(), nil
}

// ready is the model's signal that the gradients of parameters first.. are
// final: once a bucket's worth is pending, its reduction is enqueued.
func (o *deviceOverlap) ready(first int) {
	t := o.t
	if o.trace != nil {
		o.trace.layer()
	}
	if first < 0 || first >= len(t.offsets) {
		return
	}
	if lo := t.offsets[first]; o.pending-lo >= o.bucket {
		o.issue(lo)
	}
}

// issue enqueues the reduction of elements [lo, pending) (see the top of
// the file): on the compute stream the accumulated micro-batches folded into
// the gradients and, for a bf16 reduction, their rounding into the bf16
// buffer; then CommFork and, on the collectives stream, the allreduce or the
// reduce-scatter of that part.
func (o *deviceOverlap) issue(lo int) {
	t := o.t
	hi := o.pending
	if hi <= lo || o.err != nil {
		return
	}
	o.pending = lo
	grads := min(hi, t.n) // the gradients among [lo, hi)
	if t.acc != nil {
		g, a := t.rangeViews(lo, grads)
		t.e.Accumulate(g, a)
	}
	buf := t.grads
	if bf := t.bf16; bf != nil {
		g, _ := t.rangeViews(lo, grads)
		bf.c.CastToBF16(bf.ptr+2*uintptr(lo), g)
		buf = bf.buf
	}
	if err := o.f.CommFork(); err != nil {
		o.err = fmt.Errorf("fork the collectives stream: %w", err)
		return
	}
	o.forked = true
	o.trace.bucket(true)
	var err error
	if o.rs != nil {
		err = o.rs.ReduceScatterPartEnqueue(buf, 0, t.n, lo, grads, comm.Sum)
	} else {
		err = o.ar.AllReduceEnqueue(buf, lo, hi-lo, comm.Sum)
	}
	if err != nil {
		o.err = fmt.Errorf("gradient bucket [%d, %d): %w", lo, hi, err)
		return
	}
	o.trace.bucket(false)
}

// finish enqueues what backward left (the first bucket, or everything when
// backward reported nothing), the control words' allreduce where they did
// not ride along, and CommJoin; then, on the compute stream, the bf16
// gradients widened back (the whole arena, or this PE's shard). It returns
// the first failure of the step's reductions; the collectives stream is
// joined whatever happened, so that a capture in progress can end.
func (o *deviceOverlap) finish() error {
	t := o.t
	o.issue(0)
	if o.err == nil && o.top() == t.n {
		if !o.forked {
			if err := o.f.CommFork(); err != nil {
				o.err = fmt.Errorf("fork the collectives stream: %w", err)
			} else {
				o.forked = true
			}
		}
		if o.err == nil {
			if err := o.ar.AllReduceEnqueue(t.grads, t.n, ctrlWords, comm.Sum); err != nil {
				o.err = fmt.Errorf("control words allreduce: %w", err)
			}
		}
	}
	var jerr error
	if o.forked {
		o.forked = false
		if err := o.f.CommJoin(); err != nil {
			jerr = fmt.Errorf("join the collectives stream: %w", err)
		}
	}
	if err := errors.Join(o.err, jerr); err != nil {
		return err
	}
	t.widenBF16()
	return nil
}
