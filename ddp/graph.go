package ddp

import (
	"errors"
	"fmt"
	"github.com/symddp/symddp/ddp/devicestep"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
)

// The device step path. When the engine offers devicestep.Engine (the
// CUDA engine) and the arenas live in device memory, the trainer's
// strategy is the device step (gpuSteps) instead of hostStep:
//
//   - batches go through the engine's Pipeline (one per micro-batch of a
//     step with Options.Accumulate > 1, the first carrying the control
//     words and the report; the micro-batches' gradients are folded on
//     the device as hostStep folds them): gathered straight into
//     pinned host memory (float inputs or token ids, a label per sample or
//     a target per position; a batch of 256 KiB or more from an in-memory
//     source by a few goroutines at once, datasets.Gatherer), checked
//     against the model's classes (a graph replayed on the device checks
//     nothing), copied to the device on the copy stream while the previous
//     step computes (two slots, step k uses slot k%2);
//   - the step's device work (control words, forward, loss, backward, one
//     allreduce of the whole gradient arena with the control words (or,
//     with a bucket size, its buckets reduced on the comm backend's
//     collectives stream while backward runs: overlap.go), the
//     optimizer update with clipping and the non-finite check; with one PE
//     the control words stay on the host, as there is nothing to reduce
//     them with, and the graph is a copy shorter) is recorded
//     once per slot into a CUDA graph after one eager warm-up step, and
//     then launched with the step's loss scale, step number and learning
//     rate (cuda.Graph.Launch); --cuda-graph=false, or a capture that
//     fails, runs the same work eagerly;
//   - nothing waits for the device inside a step: each step's report (the
//     reduced control words and the update status, written into pinned
//     memory by the step's last kernels: StepPipeline.StoreReport) is read one step late,
//     or at once before Fit reads metrics, checks replicas, evaluates or
//     ends, so that the host runs at most one step ahead.
//
// Consequences of reading reports late: a stop request (signal) of step k
// reaches every PE with step k's report and training stops after step k+1
// on every PE; a non-finite step k is skipped on the device (its update is
// a no-op on every PE, as the reduced gradients are identical) and, unless
// Options.SkipNonFinite, latches a halt that makes every later update a
// no-op, so the parameters stay as they were before step k when Fit returns
// ErrNonFinite one step later. StepInfo.Skipped of step k+1 tells of step
// k's skip.

// enqueueAllReducer is implemented by comm backends whose allreduce runs on
// the compute engine's CUDA stream (comm/nvshmem): AllReduceEnqueue enqueues
// an in-place allreduce and returns at once, with no event and no host
// wait, so that it can be recorded in a CUDA graph. A failure of the
// enqueued kernels shows at the next wait for the stream.
type enqueueAllReducer interface {
	AllReduceEnqueue(b comm.Buffer, off, n int, op comm.Op) error
}

// report layout: the control words, then the update status (the status
// alone with one PE: gpuSteps.ctrlLocal).
const repStop = ctrlStop

// gpuSteps is the device step path's state (one per Fit).
type gpuSteps struct {
	e      devicestep.Engine
	ar     enqueueAllReducer     // nil with one PE: nothing to reduce
	ov     *deviceOverlap        // the reduction bucket by bucket during backward (overlap.go); nil: one after it
	pipe   devicestep.Pipeline   // micro-batch 0's slots, the control words and the report
	more   []devicestep.Pipeline // micro-batches 1.. of a step (Options.Accumulate > 1)
	gather *datasets.Gatherer    // batches into the pinned slots, large ones split over goroutines
	// With the training set in device memory (Options.DeviceData): its
	// rows, the source they belong to, its labels on the host, and the
	// batch the step gathers from them.
	rows         compute.ResidentRows
	rowSrc       datasets.Source
	labels       []int32
	x            compute.Tensor
	residentNote string // what resident said ("" when the rows stay on the host)
	graphs       [2]devicestep.Graph
	misses       [2]int // consecutive launches of a slot's graph refused for their loss scale
	repSkipped   int    // the report's word that says the update was skipped
	graph        bool   // capture steps (engine's setting, off after a failed capture)
	warm         bool   // an eager step has run
	n            int    // steps launched through this path
	// With one PE the control words do not go through the device (their
	// reduction would be the PE's own words): the report is the update
	// status alone, and a slot's stop request is kept here.
	ctrlLocal bool
	stops     [2]bool

	pending     int // slot whose report is unread, -1 when none
	pendingStep int
	total       int // the run's last step
}

// deviceStepBlocker says why t cannot take the device step path although
// its engine offers it ("" when it can): options or the comm backend.
// chooseStrategy then picks replicated steps, run eagerly on the device.
func (t *Trainer) deviceStepBlocker() string {
	if _, ok := t.c.(enqueueAllReducer); !ok && t.c.NPEs() > 1 {
		return fmt.Sprintf("the %s comm backend has no stream-ordered allreduce (AllReduceEnqueue): eager steps without the pipeline", t.c.Backend())
	}
	return ""
}

// newGPUSteps returns the device step path for t in a run of total steps
// on train (deviceStepBlocker said yes). It allocates the pipeline's slots
// and, where Options.DeviceData says so, puts train in device memory.
func (t *Trainer) newGPUSteps(total int, train datasets.Source) (*gpuSteps, error) {
	e := t.e.(devicestep.Engine)
	g := &gpuSteps{e: e, graph: e.StepGraphs(), pending: -1, total: total, repSkipped: ctrlWords + e.StatusSkipped()}
	extra, report := ctrlWords, []compute.Tensor{t.ctrlView, e.StatusTensor()}
	if t.c.NPEs() == 1 {
		g.ctrlLocal, g.repSkipped = true, e.StatusSkipped()
		extra, report = 0, report[1:]
	} else {
		g.ar = t.c.(enqueueAllReducer)
		if fo, ok := t.c.(comm.FixedOrderer); ok && !fo.FixedOrder() && g.graph {
			g.graph = false // NVSHMEM's host-driven fallback collectives cannot be captured
		}
		var off string
		if g.ov, off = t.newDeviceOverlap(g.ar); off != "" && t.bucketAsked {
			e.Notice("gradient buckets off, one reduction after backward: " + off)
		}
	}
	if err := g.setupTrace(t); err != nil {
		return nil, err
	}
	slots := devicestep.SlotSpec{Rows: t.micro, Sample: t.spec.Input, Tokens: t.spec.Tokens, Targets: t.spec.Targets, Extra: extra}
	if err := g.resident(t, train); err != nil {
		return nil, err
	}
	if g.rows != nil {
		// the slots carry a row index per sample (as token ids) and its label
		slots = devicestep.SlotSpec{Rows: t.micro, Sample: []int{1}, Tokens: true, Targets: 1, Extra: extra}
	}
	pipe, err := e.NewStepPipeline(slots, report...)
	if err != nil {
		return nil, fmt.Errorf("GPU step pipeline: %w", err)
	}
	g.pipe = pipe
	for range t.opts.Accumulate - 1 {
		// the other micro-batches' slots: inputs and labels only
		more := slots
		more.Extra = 0
		p, err := e.NewStepPipeline(more)
		if err != nil {
			_ = g.close()
			return nil, fmt.Errorf("GPU step pipeline (gradient accumulation): %w", err)
		}
		g.more = append(g.more, p)
	}
	g.gather = datasets.NewGatherer(t.spec)
	e.SetHaltOnNonFinite(!t.opts.SkipNonFinite)
	if err := e.ResetUpdateStatus(); err != nil {
		return nil, err
	}
	return g, nil
}

// resident puts train in device memory when Options.DeviceData asks for it
// and the engine, the model and the source allow it (see DeviceData): the
// rows once (the engine keeps them for later runs), the labels checked
// once, and the batch tensor the steps gather into.
func (g *gpuSteps) resident(t *Trainer, train datasets.Source) error {
	mode := t.opts.DeviceData
	if mode == DeviceDataOff || train == nil {
		return nil
	}
	why := ""
	dr, ok := g.e.(compute.DeviceRows)
	rd, isRows := train.(datasets.RowData)
	var x []float32
	var b []byte
	var table *[256]float32
	var y []int32
	if isRows {
		var src datasets.Source
		src, x, b, table, y = rd.RowArrays()
		isRows = src == train
	}
	cols := t.spec.InputSize()
	size := int64(4 * len(x))
	if b != nil {
		size = int64(len(b))
	}
	switch {
	case !ok:
		why = "the engine cannot keep rows in device memory"
	case t.spec.Tokens || t.spec.Targets != 1:
		why = "the model reads tokens or targets per position"
	case !isRows:
		why = "the training set is not rows of one array in memory (datasets.RowData)"
	case mode == DeviceDataAuto && size > DeviceDataMaxBytes:
		why = fmt.Sprintf("the training set takes %d MiB, more than %d MiB", size>>20, int64(DeviceDataMaxBytes)>>20)
	}
	if why != "" {
		if mode == DeviceDataOn {
			return fmt.Errorf("the training set cannot stay in device memory: %s", why)
		}
		return nil
	}
	for i, l := range y {
		if l < 0 || int(l) >= t.spec.Classes {
			return fmt.Errorf("training sample %d has label %d, the model has %d classes", i, l, t.spec.Classes)
		}
	}
	rows, err := dr.UploadRows(x, b, table, cols)
	if err != nil {
		return fmt.Errorf("training set into device memory: %w", err)
	}
	g.rows, g.rowSrc, g.labels = rows, train, y
	g.x = g.e.Alloc(append([]int{t.micro}, t.spec.Input...)...)
	g.residentNote = fmt.Sprintf("training set in device memory (%d rows, %.1f MiB): each step copies indices, the batch is gathered on the GPU", rows.Rows(), float64(rows.Bytes())/(1<<20))
	g.e.Notice(g.residentNote)
	return nil
}

// close releases the pipeline, the graphs and the gather's goroutines.
func (g *gpuSteps) close() error {
	if g == nil {
		return nil
	}
	if g.gather != nil {
		g.gather.Close()
	}
	var errs []error
	for i, gr := range g.graphs {
		if gr != nil {
			errs = append(errs, gr.Close())
			g.graphs[i] = nil
		}
	}
	if g.pipe != nil {
		errs = append(errs, g.pipe.Close())
	}
	for _, p := range g.more {
		errs = append(errs, p.Close())
	}
	g.more = nil
	return errors.Join(errs...)
}

// step runs optimizer step t.step+1 on global batch (epoch, s); see the
// top of the file. It reads this step's report before returning when Fit
// reads the device next (hostReadAfter) or the step stops the run.
func (g *gpuSteps) step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool) (stepResult, error) {
	slot := g.n % 2
	sm.Batch(epoch, s, t.idx)
	var res stepResult
	for j := range t.opts.Accumulate {
		if err := g.fill(t, j, slot, ds, t.idx[j*t.micro:(j+1)*t.micro], &res.waited); err != nil {
			return stepResult{}, err
		}
	}
	sl := g.pipe.Slot(slot)
	g.stops[slot] = wantStop
	clear(sl.HostExtra)
	if wantStop && !g.ctrlLocal {
		sl.HostExtra[ctrlStop] = 1
	}
	for j := range t.opts.Accumulate {
		if err := g.micro(j).Submit(slot); err != nil {
			return stepResult{}, fmt.Errorf("step %d: %w", t.step+1, err)
		}
	}
	t.step++
	g.n++
	scale := t.lossScale(sm, ds, epoch, s)
	lr := t.opts.lr(t.step)
	if err := g.run(t, slot, scale, lr); err != nil {
		return stepResult{}, fmt.Errorf("step %d: %w", t.step, err)
	}
	for j := range t.opts.Accumulate {
		if err := g.micro(j).Release(slot); err != nil {
			return stepResult{}, fmt.Errorf("step %d: %w", t.step, err)
		}
	}

	if g.pending >= 0 {
		r, err := g.read(t, g.pending, g.pendingStep, &res.waited)
		if err != nil {
			return res, err
		}
		res.stop, res.skipped = r.stop, r.skipped // the previous step's report (see the top of the file)
	}
	g.pending, g.pendingStep = slot, t.step
	trace := g.ov != nil && g.ov.trace.due(t.step)
	if res.stop || trace || t.hostReadAfter(t.step, epoch, s, sm.StepsPerEpoch(), g.total) {
		r, err := g.read(t, slot, t.step, &res.waited)
		if err != nil {
			return res, err
		}
		res.stop = res.stop || r.stop
		res.skipped = res.skipped || r.skipped
		g.pending = -1
		if trace { // the step is done: its stamps can be read
			g.e.Notice(g.ov.trace.report(t.step))
		}
	}
	return res, nil
}

// micro is the pipeline of micro-batch j of a step.
func (g *gpuSteps) micro(j int) devicestep.Pipeline {
	if j == 0 {
		return g.pipe
	}
	return g.more[j-1]
}

// fill waits for slot of micro-batch j's pipeline (adding the wait to
// *waited) and stages rows of ds into it: their indices and labels when
// the rows are in device memory, else the samples, checked.
func (g *gpuSteps) fill(t *Trainer, j, slot int, ds datasets.Source, rows []int, waited *time.Duration) error {
	p := g.micro(j)
	t0 := time.Now()
	err := p.Fill(slot)
	*waited += time.Since(t0)
	if err != nil {
		return fmt.Errorf("step %d: %w", t.step+1, err)
	}
	sl := p.Slot(slot)
	if g.rows != nil && ds == g.rowSrc {
		// indices and labels only: the rows are on the device (labels checked at upload)
		for r, i := range rows {
			sl.HostTokens[r], sl.HostY[r] = int32(i), -1
			if i >= 0 {
				sl.HostY[r] = g.labels[i]
			}
		}
		return nil
	}
	if g.rows != nil {
		return fmt.Errorf("step %d: the device step path holds another training set in device memory", t.step+1)
	}
	b := datasets.Batch{X: sl.HostX, Tokens: sl.HostTokens, Y: sl.HostY}
	g.gather.Gather(ds, rows, b)
	return t.checkBatch(b, rows)
}

// run enqueues the step's device work on slot: the slot's graph when there
// is one, else eagerly, capturing the slot's graph first when it is time.
func (g *gpuSteps) run(t *Trainer, slot int, scale, lr float32) error {
	v := devicestep.Values{LossScale: scale, Step: t.step, LR: lr}
	if gr := g.graphs[slot]; gr != nil {
		err := gr.Launch(v)
		if !errors.Is(err, devicestep.ErrLossScale) {
			if err == nil {
				g.misses[slot] = 0
			}
			return err
		}
		// a batch with another number of targets (an epoch's last) in a
		// graph that holds its loss scale: this step runs eagerly, and a
		// slot whose graph misses twice in a row (recorded on such a
		// batch) is recorded again at its next step
		if g.misses[slot]++; g.misses[slot] >= 2 {
			g.misses[slot] = 0
			_ = gr.Close()
			g.graphs[slot] = nil
		}
		if err := g.record(t, slot, scale, lr); err != nil {
			return err
		}
		return g.e.Err()
	}
	if g.graph && g.warm {
		gr, err := g.capture(t, slot, scale, lr)
		if err == nil {
			g.graphs[slot] = gr
			return gr.Launch(v)
		}
		g.graph = false
		g.e.Notice(fmt.Sprintf("CUDA graph capture of the training step failed (%v): the steps run eagerly", err))
	}
	if err := g.record(t, slot, scale, lr); err != nil {
		return err
	}
	g.warm = true
	return g.e.Err()
}

// capture records the step's work on slot into a graph.
func (g *gpuSteps) capture(t *Trainer, slot int, scale, lr float32) (devicestep.Graph, error) {
	if err := g.e.BeginCapture(); err != nil {
		return nil, err
	}
	rerr := g.record(t, slot, scale, lr)
	gr, err := g.e.EndStepCapture()
	if rerr != nil {
		if gr != nil {
			_ = gr.Close()
		}
		return nil, rerr
	}
	return gr, err
}

// record enqueues (or, while capturing, records) one step's device work on
// slot's tensors.
func (g *gpuSteps) record(t *Trainer, slot int, scale, lr float32) error {
	e := g.e
	if g.ov != nil {
		g.ov.trace.reset()
	}
	if !g.ctrlLocal {
		e.Copy(t.ctrlView, g.pipe.Slot(slot).Extra)
	}
	k := t.opts.Accumulate
	for j := range k {
		sl := g.micro(j).Slot(slot)
		in := models.Inputs{X: sl.X, Tokens: sl.Tokens, Targets: sl.Y}
		if g.rows != nil {
			g.e.(compute.DeviceRows).GatherResident(g.x, g.rows, sl.Tokens)
			in = models.Inputs{X: g.x, Targets: sl.Y}
		}
		t.m.Forward(in, scale, t.stats)
		if ov := g.ov; ov != nil && j == k-1 {
			// the last micro-batch's backward reduces bucket by bucket
			// (overlap.go), folding the accumulated ones in per bucket
			ov.begin()
			ov.trace.start()
			t.m.Backward(ov.readyFn)
			ov.trace.end()
			continue
		}
		t.m.Backward(nil)
		// the micro-batches' gradients folded as hostStep and its
		// finish do: acc = g0 + g1 + ... + g(k-2), then g(k-1) += acc
		switch {
		case k == 1:
		case j == 0:
			e.Copy(t.acc, t.gView)
		case j < k-1:
			e.Accumulate(t.acc, t.gView)
		default:
			e.Accumulate(t.gView, t.acc)
		}
	}
	if err := g.sync(t, lr); err != nil {
		return err
	}
	// the device writes the report (control words, update status) into
	// the slot's pinned memory as the step's last work, in its graph
	return g.pipe.StoreReport(slot)
}

// sync enqueues the step's gradient synchronisation and update: with
// several PEs the reduction (the end of the overlapped one, or the whole of
// it after backward), then the sharded update or the update of the whole
// arena.
func (g *gpuSteps) sync(t *Trainer, lr float32) error {
	switch {
	case g.ov != nil:
		if err := g.ov.finish(); err != nil {
			return err
		}
	case g.ar != nil:
		if err := t.reduceGrads(g.ar, t.dshard); err != nil {
			return err
		}
	}
	if t.dshard != nil {
		return t.dshard.update(t, lr)
	}
	if err := g.e.Update(t.o, t.pView, t.gView, t.step, lr, t.opts.ClipNorm); err != nil {
		return fmt.Errorf("optimizer: %w", err)
	}
	return nil
}

// checkBatch checks step t.step+1's batch b (rows of the training set) before
// it goes to the device, where a replayed graph checks nothing: token ids
// must be in the vocabulary, targets -1 or one of the classes.
func (t *Trainer) checkBatch(b datasets.Batch, rows []int) error {
	classes, step := t.spec.Classes, t.step+1
	if t.spec.Tokens {
		n := t.spec.InputSize()
		for i, tok := range b.Tokens {
			if tok < 0 || int(tok) >= classes {
				return fmt.Errorf("step %d: sample %d has token %d at position %d, outside the vocabulary of %d tokens",
					step, rows[i/n], tok, i%n, classes)
			}
		}
	}
	k := t.spec.Targets
	for i, y := range b.Y {
		if y != -1 && (y < 0 || int(y) >= classes) {
			if k == 1 {
				return fmt.Errorf("step %d: sample %d has label %d, the model has %d classes", step, rows[i], y, classes)
			}
			return fmt.Errorf("step %d: sample %d has target %d at position %d, the model has %d classes (or -1)",
				step, rows[i/k], y, i%k, classes)
		}
	}
	return nil
}

// read waits for slot's report of step step (adding the wait to *waited)
// and turns it into the step's result, or ErrNonFinite.
func (g *gpuSteps) read(t *Trainer, slot, step int, waited *time.Duration) (stepResult, error) {
	t0 := time.Now()
	rep, err := g.pipe.Report(slot)
	*waited += time.Since(t0)
	if err != nil {
		return stepResult{}, fmt.Errorf("step %d: %w", step, err)
	}
	r := stepResult{stop: g.stops[slot], skipped: rep[g.repSkipped] != 0}
	if !g.ctrlLocal {
		r.stop = rep[repStop] > 0
	}
	if r.skipped && !t.opts.SkipNonFinite {
		return r, fmt.Errorf("step %d: %w; lower the learning rate, clip gradients (--clip-norm) or pass --skip-nonfinite",
			step, ErrNonFinite)
	}
	return r, nil
}
