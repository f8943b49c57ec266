package cuda

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/internal/cudalib"

	"github.com/symddp/symddp/internal/settings"
)

// Options configure an Engine.
type Options struct {
	// Lib is the loaded GPU library; nil loads it from LibPath (see
	// cudalib.Load for where it is looked for).
	Lib     *cudalib.Lib
	LibPath string
	// Stream is the CUDA stream all work goes on (a cudaStream_t of
	// Device); 0 gives the engine a stream of its own on Device.
	Stream uintptr
	// Device is the GPU (-1: the stream's, or GPU 0).
	Device int
	// Timeout is the deadline of every wait for the device (default
	// comm.DefaultTimeout).
	Timeout time.Duration
	// DisableGraphs tells trainers not to capture steps in CUDA graphs
	// (GraphsEnabled); the engine itself can still capture.
	DisableGraphs bool
	// DisableFused keeps every fp32 Linear layer on the unfused path
	// (cuBLAS SGEMM and the project's bias/activation kernels) instead of
	// cuBLASLt GEMMs with fused epilogues; so does SYMDDP_CUDA_FUSED=0 in
	// the environment (for A/B benchmarks). bf16 layers run their plans
	// either way.
	DisableFused bool
	// Logger, when set, receives one Info line naming the engine and GPU,
	// and the notices of Notice.
	Logger *slog.Logger
}

// Engine is the CUDA compute.Engine. Its methods panic on programmer error
// (mismatched shapes, a tensor it did not make). A failure of the device
// while enqueuing work is kept and returned by the next Sync (ReadTensor and
// SumSquares, which cannot return it, panic with it). One engine is used by
// one goroutine at a time.
type Engine struct {
	dev     device
	info    cudalib.ContextInfo
	gpu     string
	timeout time.Duration

	pool    pool
	stage   staging
	capture captureState
	opt     updater
	status  *Tensor // the update status words (cudalib.Status*)
	exempt  *Tensor // SetDecayExempt's mask (bytes), for Updates of exemptN elements
	exemptN int
	masters []*masters // the bf16 copies of master weights (BF16Masters) that Update writes

	graphs   bool
	fused    bool     // FuseLinear plans cuBLASLt GEMMs (Options.DisableFused, SYMDDP_CUDA_FUSED)
	overlap  bool     // fused layers run their dW GEMM on the side stream beside dx (SYMDDP_CUDA_OVERLAP)
	plans    []uint64 // cuBLASLt plans, destroyed by Close
	log      *slog.Logger
	bf       *bf16State                         // what the bf16 plans share (bf16.go), made by the first
	rows     []*residentRows                    // UploadRows' datasets
	attnGrad *Tensor                            // the fp32 attention plans' shared scratch: the GEMM plans' dS (B,H,T,T), the flash plans' D (B,H,T) and causal dS tiles
	rotary   map[compute.RotarySpec]*rotaryPlan // one plan per spec, its table uploaded once (RotaryEmbedding)
	err      error                              // the first failure of enqueued work
	closed   bool
}

var (
	_ compute.Engine = (*Engine)(nil)
)

// New loads the library (unless opts.Lib is given) and returns an engine on
// opts.Stream, or on a stream of its own.
func New(opts Options) (*Engine, error) {
	lib := opts.Lib
	if lib == nil {
		var err error
		if lib, err = cudalib.Load(opts.LibPath); err != nil {
			return nil, fmt.Errorf("cuda engine: %w", err)
		}
	}
	cp, err := cudalib.OpenCompute(lib)
	if err != nil {
		return nil, fmt.Errorf("cuda engine: %w", err)
	}
	ctx, err := cp.NewContext(opts.Stream, opts.Device)
	if err != nil {
		return nil, fmt.Errorf("cuda engine: %w", err)
	}
	return newEngine(ctx, opts)
}

// streamComm is implemented by comm backends on the GPU library
// (comm/nvshmem): the engine shares their library and their stream.
type streamComm interface {
	Library() *cudalib.Lib
	Stream() uintptr
	Info() cudalib.Info
}

// OnComm returns an engine that shares c's GPU library and CUDA stream, so
// that its kernels and c's collectives are ordered without host
// synchronisation. c must be a GPU backend (nvshmem).
func OnComm(c comm.Comm, opts Options) (*Engine, error) {
	sc, ok := c.(streamComm)
	if !ok {
		return nil, fmt.Errorf("cuda engine: the %s comm backend keeps its buffers in host memory; the CUDA engine needs a GPU backend (nvshmem)", c.Backend())
	}
	opts.Lib, opts.Stream, opts.Device = sc.Library(), sc.Stream(), sc.Info().Device
	return New(opts)
}

// NewOnDevice returns an engine on dev, a compute context other than the GPU
// library's: compute/cuda/cudatest's emulated device, which runs the engine's
// own logic over host memory for tests on machines without a GPU. Engines on
// a GPU come from New and OnComm.
func NewOnDevice(dev cudalib.Device, opts Options) *Engine {
	e, _ := newEngine(dev, opts) // newEngine fails for no device
	return e
}

// newEngine finishes an engine on a compute context.
func newEngine(dev device, opts Options) (*Engine, error) {
	e := &Engine{dev: dev, info: dev.Info(), timeout: opts.Timeout, graphs: !opts.DisableGraphs, log: opts.Logger}
	e.fused = !opts.DisableFused && settings.Get(FusedEnv) != "0"
	e.overlap = settings.Get(OverlapEnv) != "0"
	if e.timeout <= 0 {
		e.timeout = comm.DefaultTimeout
	}
	if name, err := dev.DeviceName(); err == nil {
		e.gpu = name
	}
	e.status = &Tensor{e: e, ptr: e.info.Status, shape: []int{cudalib.StatusWords}, size: cudalib.StatusWords}
	if opts.Logger != nil {
		opts.Logger.Info("compute engine", "engine", e.Name(), "gpu", e.Describe())
	}
	return e, nil
}

// Name is "cuda/cublas".
func (e *Engine) Name() string { return "cuda/cublas" }

// Describe names the GPU and the stream the engine works on.
func (e *Engine) Describe() string {
	gpu := e.gpu
	if gpu == "" {
		gpu = "GPU"
	}
	own := "shared stream"
	if e.info.OwnsStream {
		own = "own stream"
	}
	fused := "Linear layers fused into cuBLASLt epilogues"
	if !e.fused {
		fused = "Linear layers unfused (" + e.fusedOff() + ")"
	}
	return fmt.Sprintf("%s (device %d, %d SMs), fp32 SGEMM without TF32, %s, %s", gpu, e.info.Device, e.info.SMCount, fused, own)
}

// GraphsEnabled reports whether trainers should capture their steps in CUDA
// graphs (Options.DisableGraphs is false).
func (e *Engine) GraphsEnabled() bool { return e.graphs }

// Notice logs a one-line notice on the engine's logger (a trainer's
// fallback from the graph path, for instance); nothing without a logger.
func (e *Engine) Notice(msg string) {
	if e.log != nil {
		e.log.Info(msg)
	}
}

// Stream is the CUDA stream (a cudaStream_t) all work goes on.
func (e *Engine) Stream() uintptr { return e.info.Stream }

// fail keeps the first failure of enqueued work.
func (e *Engine) fail(op string, err error) {
	if err == nil {
		return
	}
	err = fmt.Errorf("cuda: %s: %w", op, err)
	if e.capture.active {
		// A failure while recording fails the capture only: EndCapture
		// reports it and the engine goes on eagerly.
		if e.capture.err == nil {
			e.capture.err = err
		}
		return
	}
	if e.err == nil {
		e.err = err
	}
}

// Err is the first failure of enqueued work, if any.
func (e *Engine) Err() error { return e.err }

// Alloc returns a zeroed tensor from the engine's device pool. Call it at
// build time only (never while capturing).
func (e *Engine) Alloc(shape ...int) compute.Tensor {
	n := checkShape("Alloc", shape)
	return &Tensor{e: e, ptr: e.alloc("Alloc", 4*n), shape: append([]int(nil), shape...), size: n}
}

// View returns a tensor over elements [off, off+prod(shape)) of the device
// arena a.
func (e *Engine) View(a compute.Arena, off int, shape ...int) compute.Tensor {
	n := checkShape("View", shape)
	if a.Dev == 0 {
		panic("cuda: View of an arena without device memory")
	}
	if off < 0 || off+n > a.N {
		panic(fmt.Sprintf("cuda: View %v at offset %d is outside an arena of %d elements", shape, off, a.N))
	}
	return &Tensor{e: e, ptr: a.Dev + 4*uintptr(off), shape: append([]int(nil), shape...), size: n}
}

var _ compute.Joiner = (*Engine)(nil)

// Join returns a tensor of shape over ts when they are this engine's, of
// one element type, back to back in this order in device memory and hold
// its elements (views of one arena, or of the bf16 copy of its weights,
// which keeps their order); nil otherwise.
func (e *Engine) Join(shape []int, ts ...compute.Tensor) compute.Tensor {
	n := checkShape("Join", shape)
	if len(ts) == 0 {
		return nil
	}
	var first *Tensor
	total, next := 0, uintptr(0)
	for i, t := range ts {
		d, ok := t.(*Tensor)
		if !ok || d == nil || d.e != e || (i > 0 && (d.dtype != first.dtype || d.ptr != next)) {
			return nil
		}
		if i == 0 {
			first = d
		}
		next, total = d.ptr+uintptr(d.bytes()), total+d.size
	}
	if total != n {
		return nil
	}
	return &Tensor{e: e, ptr: first.ptr, shape: append([]int(nil), shape...), size: n, dtype: first.dtype}
}

// AllocLabels returns room for n labels in device memory, all 0 (as the
// CPU engine's).
func (e *Engine) AllocLabels(n int) compute.Labels {
	if n <= 0 {
		panic(fmt.Sprintf("cuda: AllocLabels(%d)", n))
	}
	return &Labels{e: e, ptr: e.alloc("AllocLabels", 4*n), host: make([]int32, n)}
}

// alloc takes zeroed device memory from the pool; it panics when the
// device refuses (there is no error to return at build time): with a
// *compute.DeviceMemoryError when it has no room left, which ddp's trainer
// turns into an error.
func (e *Engine) alloc(op string, bytes int) uintptr {
	p, err := e.tryAlloc(op, bytes)
	if errors.Is(err, compute.ErrDeviceMemory) {
		panic(err)
	}
	if err != nil {
		panicDevice(op, err)
	}
	return p
}

// tryAlloc is alloc returning the device's refusal: a
// *compute.DeviceMemoryError when it has no room left.
func (e *Engine) tryAlloc(op string, bytes int) (uintptr, error) {
	if e.capture.active {
		panic(fmt.Sprintf("cuda: %s while capturing a CUDA graph: allocate at build time", op))
	}
	p, err := e.pool.take(e.dev, bytes)
	if errors.Is(err, cudalib.ErrNoMemory) {
		return 0, &compute.DeviceMemoryError{Engine: e.Name(), Op: op, Bytes: int64(bytes), Err: err}
	}
	if err == nil {
		err = e.dev.Zero(p, bytes)
	}
	return p, err
}

// Sync waits until every operation issued so far is complete, and returns
// the first failure of enqueued work.
func (e *Engine) Sync() error {
	if e.capture.active {
		e.capture.fail("Sync")
		return errors.New("cuda: Sync while capturing a CUDA graph")
	}
	if e.err != nil {
		return e.err
	}
	if err := e.dev.Sync(e.timeout); err != nil {
		e.fail("Sync", err)
		return e.err
	}
	return nil
}

// Close frees the pinned staging buffers and their events, destroys the
// fused layers' cuBLASLt plans, frees the pool's device memory (the
// engine's tensors, labels and optimizer state) and closes the device
// context, in that order. It does not wait for the device before freeing;
// closing the context synchronizes its streams before releasing them.
// Graphs captured on the engine are not destroyed (Graph.Close). A second
// Close does nothing. Tensors and labels of the engine must not be used
// afterwards; arenas it viewed belong to their owner.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	errs := []error{e.stage.free(e.dev)}
	e.rows, e.rotary = nil, nil
	e.closeBF16()
	for _, p := range e.plans {
		errs = append(errs, e.dev.LtPlanDestroy(p))
	}
	e.plans = nil
	errs = append(errs, e.pool.free(e.dev))
	errs = append(errs, e.dev.Close())
	return errors.Join(errs...)
}

// DeviceBytes is the device memory the engine has allocated (its pool's
// chunks: activations, optimizer state, workspaces, the bf16 plans'
// buffers), without the comm backend's arenas.
func (e *Engine) DeviceBytes() int64 { return e.pool.bytes }

// TakenBytes is the device memory the engine's pool has handed out of its
// chunks (each piece rounded up to 256 bytes), less what build steps gave
// back: what the engine's tensors, plans and workspaces take, without the
// chunks' unused ends that DeviceBytes counts.
func (e *Engine) TakenBytes() int64 { return e.pool.taken }

// pool hands out device memory from chunks allocated with cudaMalloc: a
// piece of at least poolOwn bytes gets a chunk of its own size, smaller
// ones share 64 MiB chunks. A large piece that ended the shared chunk
// instead, leaving its unused end behind, cost a bf16 llama-124m at 16
// sequences 1.2 GiB of its 7.8 (activations of 24 to 64 MiB each).
type pool struct {
	bytes  int64 // of every chunk
	taken  int64 // handed out, rounded to poolAlign
	chunks []uintptr
	next   uintptr // first free byte of the shared chunk
	left   int     // bytes left in it
}

const (
	poolChunk = 64 << 20      // bytes of a shared chunk
	poolOwn   = poolChunk / 4 // a piece this large has a chunk of its own
	poolAlign = 256           // alignment of every allocation
)

// take hands out bytes (rounded up to poolAlign), allocating a chunk when
// the piece is large or the shared chunk has no room for it.
func (p *pool) take(d device, bytes int) (uintptr, error) {
	bytes = (bytes + poolAlign - 1) &^ (poolAlign - 1)
	if bytes >= poolOwn {
		ptr, err := d.DevAlloc(bytes)
		if err != nil {
			return 0, err
		}
		p.chunks = append(p.chunks, ptr)
		p.bytes += int64(bytes)
		p.taken += int64(bytes)
		return ptr, nil
	}
	if bytes > p.left {
		ptr, err := d.DevAlloc(poolChunk)
		if err != nil {
			return 0, err
		}
		p.chunks = append(p.chunks, ptr)
		p.bytes += poolChunk
		p.next, p.left = ptr, poolChunk
	}
	ptr := p.next
	p.next += uintptr(bytes)
	p.left -= bytes
	p.taken += int64(bytes)
	return ptr, nil
}

// giveBack returns ptr, of bytes, to the pool when it is what take handed
// out last from the shared chunk (a build step that took memory and then
// did not need it); any other piece stays taken until free.
func (p *pool) giveBack(ptr uintptr, bytes int) {
	bytes = (bytes + poolAlign - 1) &^ (poolAlign - 1)
	if bytes < poolOwn && ptr+uintptr(bytes) == p.next {
		p.next, p.left = ptr, p.left+bytes
		p.taken -= int64(bytes)
	}
}

func (p *pool) free(d device) error {
	var errs []error
	for _, c := range p.chunks {
		errs = append(errs, d.DevFree(c))
	}
	p.chunks, p.left, p.bytes, p.taken = nil, 0, 0, 0
	return errors.Join(errs...)
}
