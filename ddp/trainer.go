package ddp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp/devicestep"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// ctrlWords is the number of control words after the gradients in the
// gradient arena. They ride along with the last bucket's allreduce, so that
// every PE learns at no extra cost whether any PE asked to stop or saw a
// non-finite loss (the sharded update exchanges them with its verdicts
// instead: shardedFinish).
const ctrlWords = 2

const (
	ctrlStop      = 0 // a PE wants to stop after this step (signal)
	ctrlNonFinite = 1 // a PE's loss was NaN or Inf
)

// Trainer trains one model replica per PE. Build it with New; it is used by
// one goroutine.
type Trainer struct {
	c    comm.Comm
	e    compute.Engine
	m    models.Model
	o    optim.Optimizer
	opts Options

	initSource string // InitSource

	specs   []models.ParamSpec
	offsets []int // element offset of each parameter in the arenas
	n       int   // parameter elements

	params, grads  comm.Buffer // symmetric: n and n+ctrlWords float32
	pArena, gArena compute.Arena
	pView, gView   compute.Tensor // whole-arena views (n elements)
	ctrlView       compute.Tensor // the control words of the gradient arena
	state          []float32      // optimizer state, Slots()·n, host engines
	stateSlots     [][]float32
	stateBuf       comm.Buffer    // symmetric optimizer state (sharded update), slots·stateStride
	stateStride    int            // elements between state slots in stateBuf
	acc            compute.Tensor // gradient accumulation (Accumulate > 1)
	accArena       compute.Arena

	fitTest bool // the running Fit has a test set (epochEvalDue)

	micro  int           // rows of one forward on this PE
	spec   datasets.Spec // the batches the model reads
	in     models.Inputs // the micro-batch on the engine
	x      compute.Tensor
	batch  datasets.Batch // host staging (X aliases x on host engines)
	idx    []int          // this PE's rows of the current global batch
	stats  compute.Tensor // train window: loss sum, correct, counted targets
	estats compute.Tensor // evaluation
	strat  strategy       // how gradients are synchronised and applied
	ctrl   [ctrlWords]float32
	stats3 [3]float32
	// the train window as a step found it (host engines), put back when the
	// step is skipped; made once, so that no step allocates
	statsBefore []float32

	// every PE's rows of the current global batch, and where a Source
	// without datasets.TargetCounter has them gathered to count their
	// targets (lossScale; made at its first use)
	rows      []int
	countRows datasets.Batch

	// sharded update (ZeRO-1); sharder is nil for the replicated one
	sharder          comm.Sharder
	shardLo, shardHi int         // this PE's shard of the arenas
	stateShard       [][]float32 // this PE's shard of each state slot
	xchg             comm.Buffer // symmetric bytes, two halves of xchgRow per PE: step verdicts
	xrow             []byte      // this PE's row of the step (its own allocation: cgo backends refuse memory holding Go pointers)
	xall             []byte      // every PE's row, read back
	// the sharded update on the device step path (zero.go); nil otherwise
	dshard *deviceShard
	// the bf16 gradient buffer (graddtype.go); nil when gradients reduce in fp32
	bf16 *bf16Grads

	metrics comm.Buffer // symmetric float32 scratch for reducing metrics
	hashes  comm.Buffer // symmetric bytes, 8 per PE, for the replica check
	ctl     comm.Buffer // symmetric bytes: PE 0's word on checkpoints

	// buckets in flight during backward
	bucketElems int
	// elements of a bucket on the device step path: 0 (one reduction after
	// backward), Options.BucketBytes' or the default's (overlap.go)
	deviceBucket int
	bucketAsked  bool   // Options.BucketBytes was positive: say why, when the device path cannot overlap
	bucketWhy    string // why the default is no buckets on the device path (defaultDeviceBucket)
	sharedGPU    string // what the engine did for PEs that share a GPU and reduce buckets (shareGPU)
	pendingEnd   int
	reqs         []comm.Request
	bucketErr    error
	lastMicro    bool
	readyFn      func(first int)              // t.ready, made once: a method value passed each step would allocate
	views        map[[2]int][2]compute.Tensor // cached bucket views

	// the update's runs of decaying and exempt parameters (decay.go), over
	// the whole arena and over this PE's shard
	segs, shardSegs []updateSeg

	step int // optimizer steps done

	closed bool // Close ran: the symmetric buffers are freed
}

// New builds a Trainer: it lays the model's parameters out in two
// symmetric arenas, builds the model on the engine for this PE's
// micro-batch, initialises the parameters on PE 0 and broadcasts them.
// It is collective: every PE calls it with the same model and options. It
// panics when c, e, m or o is nil.
func New(c comm.Comm, e compute.Engine, m models.Model, o optim.Optimizer, opts Options) (*Trainer, error) {
	switch {
	case c == nil:
		panic("ddp.New: nil comm")
	case e == nil:
		panic("ddp.New: nil engine")
	case m == nil:
		panic("ddp.New: nil model")
	case o == nil:
		panic("ddp.New: nil optimizer")
	}
	asked := opts.BucketBytes // the device path has a default of its own (overlap.go)
	opts.setDefaults()
	if err := opts.validate(c.NPEs()); err != nil {
		return nil, err
	}
	t := &Trainer{c: c, e: e, m: m, o: o, opts: opts}
	switch {
	case asked > 0:
		t.deviceBucket, t.bucketAsked = max(1, asked/4), true
	case asked == 0:
		t.deviceBucket, t.bucketWhy = defaultDeviceBucket(c)
	}
	t.readyFn = t.ready
	t.specs = m.Params()
	if err := models.CheckParams(t.specs); err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name(), err) // on every PE, before any collective
	}
	t.offsets = make([]int, len(t.specs))
	for i, s := range t.specs {
		t.offsets[i] = t.n
		t.n += s.Size()
	}
	if t.n == 0 {
		return nil, fmt.Errorf("model %s declares no parameters", m.Name())
	}
	t.micro = opts.GlobalBatch / (c.NPEs() * opts.Accumulate)
	if err := t.allocArenas(); err != nil {
		return nil, err
	}
	noDecay, err := t.planDecay()
	if err != nil {
		return nil, err
	}
	t.segs = t.segments(noDecay, 0, t.n, t.stateSlots)
	if noDecay != nil && t.pArena.Host == nil {
		if err := t.deviceExempt(); err != nil {
			return nil, err
		}
	}
	if t.sharder != nil {
		t.shardSegs = t.segments(noDecay, t.shardLo, t.shardHi, t.stateShard)
	}
	if err := t.shareGPU(); err != nil {
		return nil, err
	}
	if err := t.build(); err != nil {
		return nil, err
	}
	if err := t.initParams(); err != nil {
		return nil, err
	}
	if t.strat, err = t.chooseStrategy(); err != nil {
		return nil, err
	}
	_, device := t.strat.(*deviceStrategy)
	if err := t.gradDTypeSetup(device); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Trainer) allocArenas() error {
	var err error
	if t.params, err = t.c.Alloc(comm.Float32, t.n); err != nil {
		return fmt.Errorf("allocate parameter arena (%d floats): %w", t.n, err)
	}
	if t.grads, err = t.c.Alloc(comm.Float32, t.n+ctrlWords); err != nil {
		return fmt.Errorf("allocate gradient arena (%d floats): %w", t.n, err)
	}
	if t.metrics, err = t.c.Alloc(comm.Float32, 8); err != nil {
		return fmt.Errorf("allocate metrics buffer: %w", err)
	}
	if t.hashes, err = t.c.Alloc(comm.Byte, 8*t.c.NPEs()); err != nil {
		return fmt.Errorf("allocate replica-check buffer: %w", err)
	}
	if t.ctl, err = t.c.Alloc(comm.Byte, ctlBytes); err != nil {
		return fmt.Errorf("allocate control buffer: %w", err)
	}
	if t.pArena, err = arenaOf(t.params); err != nil {
		return err
	}
	if t.gArena, err = arenaOf(t.grads); err != nil {
		return err
	}
	if t.pArena.Host == nil {
		return nil
	}
	if s, ok := t.c.(comm.Sharder); ok && t.c.NPEs() > 1 && !t.opts.ReplicatedUpdate {
		if err := t.allocSharded(s); err != nil {
			return err
		}
	}
	if slots := t.o.Slots(); slots > 0 && t.stateSlots == nil {
		t.state = make([]float32, slots*t.n)
		t.stateSlots = make([][]float32, slots)
		for i := range t.stateSlots {
			t.stateSlots[i] = t.state[i*t.n : (i+1)*t.n : (i+1)*t.n]
		}
	}
	return nil
}

// xchgRow is the size of a PE's row in the exchange buffer of the sharded
// update: stop wish, non-finite loss, non-finite shard (a byte each), then
// at byte 8 the shard's sum of squares (float64 bits, for clipping). The
// buffer has two halves, used by odd and even steps: a PE may only write a
// half again after the next step's exchange barrier, which every peer
// passes after reading it. (One half is enough on shm, whose reduce-scatter
// starts with a barrier; an MPI reduce-scatter is not one when a PE's shard
// is empty.)
const xchgRow = 16

// allocSharded sets the trainer up for the sharded update: the optimizer
// state in the symmetric heap (so that an all-gather can assemble it for a
// checkpoint), slots a multiple of comm.ShardAlign apart so that every
// slot splits like the arenas, and the exchange buffer. A heap too small
// for the state leaves the update replicated.
func (t *Trainer) allocSharded(s comm.Sharder) error {
	npes, me := t.c.NPEs(), t.c.MyPE()
	if slots := t.o.Slots(); slots > 0 {
		t.stateStride = (t.n + comm.ShardAlign - 1) / comm.ShardAlign * comm.ShardAlign
		b, err := t.c.Alloc(comm.Float32, slots*t.stateStride)
		if errors.Is(err, comm.ErrHeapExhausted) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("allocate optimizer state (%d floats): %w", slots*t.stateStride, err)
		}
		t.stateBuf = b
		all := b.(comm.HostBuffer).Float32s()
		t.stateSlots = make([][]float32, slots)
		for k := range t.stateSlots {
			t.stateSlots[k] = all[k*t.stateStride : k*t.stateStride+t.n : k*t.stateStride+t.n]
		}
	}
	var err error
	if t.xchg, err = t.c.Alloc(comm.Byte, 2*xchgRow*npes); err != nil {
		return fmt.Errorf("allocate step exchange buffer: %w", err)
	}
	t.xrow, t.xall = make([]byte, xchgRow), make([]byte, xchgRow*npes)
	t.sharder = s
	t.shardLo, t.shardHi = comm.Shard(0, t.n, npes, me)
	t.stateShard = make([][]float32, len(t.stateSlots))
	for k, st := range t.stateSlots {
		t.stateShard[k] = st[t.shardLo:t.shardHi:t.shardHi]
	}
	return nil
}

// ShardedUpdate reports whether each PE updates only its shard of the
// parameters (see Options.ReplicatedUpdate).
func (t *Trainer) ShardedUpdate() bool { return t.sharder != nil || t.dshard != nil }

// arenaOf turns a symmetric buffer into an Arena the engine can view.
func arenaOf(b comm.Buffer) (compute.Arena, error) {
	switch v := b.(type) {
	case comm.HostBuffer:
		return compute.HostArena(v.Float32s()), nil
	case comm.DeviceBuffer:
		return compute.Arena{Dev: v.DevicePtr(), N: v.Len()}, nil
	}
	return compute.Arena{}, fmt.Errorf("symmetric buffer %T is neither in host nor in device memory", b)
}

func (t *Trainer) build() (err error) {
	defer func() {
		// a GPU that is full ends New with an error, not the engine's panic
		compute.RecoverDeviceMemory(recover(), &err, fmt.Sprintf("build model %s for %d rows", t.m.Name(), t.micro))
	}()
	e := t.e
	t.spec = t.m.Data()
	if t.spec.Targets < 1 || t.spec.Classes < 1 || t.spec.InputSize() < 1 {
		return fmt.Errorf("model %s reads batches of %+v: it needs an input, targets and classes", t.m.Name(), t.spec)
	}
	pv := make([]compute.Tensor, len(t.specs))
	gv := make([]compute.Tensor, len(t.specs))
	for i, s := range t.specs {
		pv[i] = e.View(t.pArena, t.offsets[i], s.Shape...)
		gv[i] = e.View(t.gArena, t.offsets[i], s.Shape...)
	}
	if err := t.m.Build(e, pv, gv, t.micro); err != nil {
		if head := "build model " + t.m.Name() + ":"; strings.HasPrefix(err.Error(), head) {
			return fmt.Errorf("%w (for %d rows)", err, t.micro) // the model's own words name it already
		}
		return fmt.Errorf("build model %s for %d rows: %w", t.m.Name(), t.micro, err)
	}
	t.pView = e.View(t.pArena, 0, t.n)
	t.gView = e.View(t.gArena, 0, t.n)
	t.ctrlView = e.View(t.gArena, t.n, ctrlWords)
	if t.opts.Accumulate > 1 {
		t.acc = e.Alloc(t.n)
		if h := compute.HostData(t.acc); h != nil {
			t.accArena = compute.HostArena(h)
			t.acc = e.View(t.accArena, 0, t.n)
		} else if dp, ok := t.acc.(devicePointer); ok {
			t.accArena = compute.Arena{Dev: dp.DevicePtr(), N: t.n} // for the device path's bucket views
		}
	}
	in := t.spec.InputSize()
	if t.spec.Tokens {
		t.in.Tokens = e.AllocLabels(t.micro * in)
		t.batch.Tokens = make([]int32, t.micro*in)
	} else {
		xs := append([]int{t.micro}, t.spec.Input...)
		t.x = e.Alloc(xs...)
		t.in.X = t.x
		if h := compute.HostData(t.x); h != nil && len(h) == t.micro*in {
			t.batch.X = h
		} else {
			t.batch.X = make([]float32, t.micro*in)
		}
	}
	t.in.Targets = e.AllocLabels(t.micro * t.spec.Targets)
	t.batch.Y = make([]int32, t.micro*t.spec.Targets)
	t.idx = make([]int, t.micro*t.opts.Accumulate)
	t.rows = make([]int, t.opts.GlobalBatch)
	t.stats = e.Alloc(3)
	t.statsBefore = make([]float32, 3)
	t.estats = e.Alloc(3)
	t.bucketElems = t.n
	if t.opts.BucketBytes > 0 {
		t.bucketElems = max(1, t.opts.BucketBytes/4)
	}
	t.reqs = make([]comm.Request, 0, len(t.specs)+1)
	return nil
}

// initParams initialises the parameters on PE 0, from the seed or from
// Options.InitFrom (initFrom), and broadcasts them, so that every replica
// starts from PE 0's bits.
func (t *Trainer) initParams() error {
	if t.opts.InitFrom != "" {
		if err := t.initFrom(); err != nil {
			return err
		}
	} else if t.c.MyPE() == 0 {
		t.e.SetTensor(t.pView, models.InitArena(t.specs, t.opts.Seed))
		if err := t.e.Sync(); err != nil {
			return fmt.Errorf("initialise parameters: %w", err)
		}
	}
	if err := t.c.Broadcast(t.params, 0, t.n, 0); err != nil {
		return fmt.Errorf("broadcast initial parameters: %w", err)
	}
	t.paramsWritten()
	return nil
}

// paramsWritten tells an engine that keeps copies of the parameters
// (devicestep.ParamsWatcher) that ddp wrote the arena.
func (t *Trainer) paramsWritten() {
	if w, ok := t.e.(devicestep.ParamsWatcher); ok {
		w.ParamsWritten()
	}
}

// NumParams is the number of parameters in the arena.
func (t *Trainer) NumParams() int { return t.n }

// Step is the number of optimizer steps done so far.
func (t *Trainer) Step() int { return t.step }

// MicroBatch is the number of rows of one forward on this PE.
func (t *Trainer) MicroBatch() int { return t.micro }

// Params copies the parameter arena into a new host slice.
func (t *Trainer) Params() []float32 {
	t.mustBeOpen()
	out := make([]float32, t.n)
	t.e.ReadTensor(out, t.pView)
	return out
}

// ParamSpecs returns the model's parameters and their offsets in the arena.
func (t *Trainer) ParamSpecs() ([]models.ParamSpec, []int) { return t.specs, t.offsets }

// Close frees the trainer's symmetric buffers (collective). The Comm stays
// open. A second Close does nothing; any other use of a closed Trainer but
// its counters (NumParams, Step, MicroBatch, ParamSpecs) panics.
func (t *Trainer) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	var errs []error
	if t.strat != nil {
		errs = append(errs, t.strat.close())
	}
	for _, b := range []comm.Buffer{t.xchg, t.stateBuf, t.ctl, t.hashes, t.metrics, t.grads, t.params} {
		if b != nil {
			errs = append(errs, t.c.Free(b))
		}
	}
	return errors.Join(errs...)
}

// mustBeOpen panics when the trainer is closed: its buffers are freed, and a
// step on them would fail in the comm with an error that names no cause.
func (t *Trainer) mustBeOpen() {
	if t.closed {
		panic("ddp: Trainer used after Close")
	}
}
