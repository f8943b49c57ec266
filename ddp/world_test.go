package ddp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
)

// world is an emulated job of several PEs in one process, one goroutine and
// one emulated CUDA engine each, so that the trainer takes its device step
// path with several PEs on a machine without a GPU. Its comm (worldComm)
// keeps every Float32 buffer in the "device" memory of its PE's engine and
// runs each collective at once between the PEs' goroutines (the PEs meet at
// a barrier, read their peers' memory, meet again, write their own), with
// every sum the left fold over PE 0..N-1 in float32, as comm/nvshmem's
// kernels add. The enqueued collectives (the Enqueue methods) go on the
// PE's emulated device (cudatest.Device.Enqueue): they run when called, or
// are recorded into the step's graph while the engine captures one, and run
// in order with the engine's work at each launch, so steps of several PEs
// can be recorded and replayed too. Like comm/nvshmem it has a collectives
// stream (CommFork, CommJoin: a flag here, as the emulated device runs
// everything in order), refuses the collectives that wait on the host while
// it is forked, and keeps a trace (TraceStamp: a counter per PE, the order
// the stamps ran in).
type world struct {
	npes int
	devs []*cudatest.Device
	engs []*cuda.Engine

	forked []bool     // per PE: CommFork without its CommJoin
	forks  []int      // per PE: CommFork calls
	calls  [][]string // per PE: every collective, fork and join called, in order (record)
	trace  [][]uint64 // per PE: TraceStamp's slots
	clock  []uint64   // per PE: the last stamp's value
	ownGPU bool       // SharesDevice says that each PE has a GPU of its own

	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	gen     int
	bufs    [][]*wBuf // per PE, in allocation order (every PE allocates alike)
}

// newWorld is a world of npes PEs whose engines run eagerly.
func newWorld(npes int) *world { return newWorldOf(npes, cuda.Options{DisableGraphs: true}) }

// newWorldOf is a world of npes PEs whose engines have opts.
func newWorldOf(npes int, opts cuda.Options) *world {
	w := &world{npes: npes, bufs: make([][]*wBuf, npes), forked: make([]bool, npes), forks: make([]int, npes),
		calls: make([][]string, npes), trace: make([][]uint64, npes), clock: make([]uint64, npes)}
	for pe := range w.trace {
		w.trace[pe] = make([]uint64, traceSlotsEmulated)
	}
	w.cond = sync.NewCond(&w.mu)
	for range npes {
		d := cudatest.NewDevice()
		w.devs = append(w.devs, d)
		w.engs = append(w.engs, cuda.NewOnDevice(d, opts))
	}
	return w
}

// record appends a call of PE c.pe's to w.calls: its name and arguments,
// a buffer by its kind (its address differs between PEs). On a GPU every
// PE must launch the same collectives in the same order with the same
// arguments (cuda/sd_collectives.cu), so every PE's record must be alike.
func (c *worldComm) record(name string, args ...any) {
	for i, a := range args {
		if b, ok := a.(comm.Buffer); ok {
			args[i] = b.Kind()
		}
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.w.calls[c.pe] = append(c.w.calls[c.pe], fmt.Sprint(name, args))
}

// comm is PE pe's comm.
func (w *world) comm(pe int) *worldComm { return &worldComm{w: w, pe: pe} }

// barrier returns when every PE has called it.
func (w *world) barrier() {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.gen
	if w.arrived++; w.arrived == w.npes {
		w.arrived, w.gen = 0, w.gen+1
		w.cond.Broadcast()
		return
	}
	for g == w.gen {
		w.cond.Wait()
	}
}

type wBuf struct {
	kind comm.Kind
	n    int
	id   int     // allocation number, the same on every PE
	ptr  uintptr // Float32: the engine's device memory
	b    []byte  // the bytes (aliasing the device memory for Float32)
}

func (b *wBuf) Kind() comm.Kind    { return b.kind }
func (b *wBuf) Len() int           { return b.n }
func (b *wBuf) DevicePtr() uintptr { return b.ptr }

type worldComm struct {
	w  *world
	pe int
}

var _ enqueueSharder = (*worldComm)(nil)
var _ enqueueAllReducer = (*worldComm)(nil)

func (c *worldComm) MyPE() int          { return c.pe }
func (c *worldComm) NPEs() int          { return c.w.npes }
func (c *worldComm) Backend() string    { return "emulated-devices" }
func (c *worldComm) FixedOrder() bool   { return true }
func (c *worldComm) SharesDevice() bool { return !c.w.ownGPU }
func (c *worldComm) Alloc(kind comm.Kind, n int) (comm.Buffer, error) {
	if err := c.joined("alloc"); err != nil {
		return nil, err
	}
	w := c.w
	w.mu.Lock()
	b := &wBuf{kind: kind, n: n, id: len(w.bufs[c.pe])}
	w.bufs[c.pe] = append(w.bufs[c.pe], b)
	w.mu.Unlock()
	if kind == comm.Float32 || kind == comm.BFloat16 {
		words := (n*kind.Size() + 3) / 4
		b.ptr = w.engs[c.pe].Alloc(words).(*cuda.Tensor).DevicePtr()
		b.b = w.devs[c.pe].Bytes(b.ptr, 4*words)
		clear(b.b)
	} else {
		b.b = make([]byte, n*kind.Size())
	}
	return b, nil
}
func (c *worldComm) Free(comm.Buffer) error { return nil }

// on is PE pe's copy of b.
func (c *worldComm) on(b comm.Buffer, pe int) *wBuf {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.w.bufs[pe][b.(*wBuf).id]
}

func (c *worldComm) PutBytes(dst comm.Buffer, off int, src []byte, pe int) error {
	copy(c.on(dst, pe).b[off:], src)
	return nil
}
func (c *worldComm) GetBytes(dst []byte, src comm.Buffer, off int, pe int) error {
	copy(dst, c.on(src, pe).b[off:])
	return nil
}
func (c *worldComm) PutFloat32(dst comm.Buffer, off int, src []float32, pe int) error {
	b := c.on(dst, pe).b[4*off:]
	for i, v := range src {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return nil
}
func (c *worldComm) GetFloat32(dst []float32, src comm.Buffer, off int, pe int) error {
	b := c.on(src, pe).b[4*off:]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return nil
}
func (c *worldComm) P(dst comm.Buffer, off int, v float32, pe int) error {
	return c.PutFloat32(dst, off, []float32{v}, pe)
}
func (c *worldComm) G(src comm.Buffer, off int, pe int) (float32, error) {
	var v [1]float32
	err := c.GetFloat32(v[:], src, off, pe)
	return v[0], err
}
func (c *worldComm) PutSignal(comm.Buffer, int, []float32, comm.Buffer, int, uint64, comm.SignalOp, int) error {
	return errors.New("worldComm: no signals")
}
func (c *worldComm) WaitUntil(comm.Buffer, int, comm.Cmp, uint64) error {
	return errors.New("worldComm: no signals")
}
func (c *worldComm) Fence() error { return nil }
func (c *worldComm) Quiet() error { return nil }
func (c *worldComm) Barrier() error {
	c.record("Barrier")
	if err := c.joined("barrier"); err != nil {
		return err
	}
	c.w.barrier()
	return nil
}
func (c *worldComm) Close() error { return nil }

// values reads elements [lo, lo+len(v)) of PE pe's copy of b, Float32 or
// BFloat16 (widened).
func (c *worldComm) values(v []float32, b comm.Buffer, lo, pe int) error {
	if b.Kind() == comm.Float32 {
		return c.GetFloat32(v, b, lo, pe)
	}
	raw := c.on(b, pe).b[2*lo:]
	for i := range v {
		v[i] = cudatest.F32(binary.LittleEndian.Uint16(raw[2*i:]))
	}
	return nil
}

// setValues writes v at element lo of this PE's copy of b, rounded to
// nearest even for BFloat16.
func (c *worldComm) setValues(b comm.Buffer, lo int, v []float32) error {
	if b.Kind() == comm.Float32 {
		return c.PutFloat32(b, lo, v, c.pe)
	}
	raw := c.on(b, c.pe).b[2*lo:]
	for i, x := range v {
		binary.LittleEndian.PutUint16(raw[2*i:], cudatest.BF16(x))
	}
	return nil
}

// fold is elements [lo, hi) of Float32 or BFloat16 buffer b reduced over
// every PE's copy in PE order, in float32.
func (c *worldComm) fold(b comm.Buffer, lo, hi int, op comm.Op) ([]float32, error) {
	if b.Kind() != comm.Float32 && b.Kind() != comm.BFloat16 {
		return nil, fmt.Errorf("worldComm: reduction of a %v buffer", b.Kind())
	}
	out := make([]float32, hi-lo)
	v := make([]float32, hi-lo)
	for pe := range c.w.npes {
		if err := c.values(v, b, lo, pe); err != nil {
			return nil, err
		}
		for i, x := range v {
			switch {
			case pe == 0:
				out[i] = x
			case op == comm.Max:
				out[i] = max(out[i], x)
			case op == comm.Min:
				out[i] = min(out[i], x)
			default:
				out[i] += x
			}
		}
	}
	if op == comm.Mean {
		for i := range out {
			out[i] /= float32(c.w.npes)
		}
	}
	return out, nil
}

// reduceInto reduces [lo, hi) of b and writes it into the copies of the
// PEs that want it.
func (c *worldComm) reduceInto(b comm.Buffer, lo, hi int, op comm.Op, want bool) error {
	c.w.barrier()
	r, err := c.fold(b, lo, hi, op)
	c.w.barrier()
	if err != nil || !want {
		return err
	}
	return c.setValues(b, lo, r)
}

func (c *worldComm) AllReduce(b comm.Buffer, off, n int, op comm.Op) error {
	c.record("AllReduce", b, off, n, op)
	if err := c.joined("allreduce"); err != nil {
		return err
	}
	return c.reduceInto(b, off, off+n, op, true)
}
func (c *worldComm) AllReduceEnqueue(b comm.Buffer, off, n int, op comm.Op) error {
	c.record("AllReduceEnqueue", b, off, n, op)
	return c.enqueue(func() error { return c.reduceInto(b, off, off+n, op, true) })
}
func (c *worldComm) IAllReduce(b comm.Buffer, off, n int, op comm.Op) (comm.Request, error) {
	return doneReq{}, c.AllReduce(b, off, n, op)
}
func (c *worldComm) Reduce(b comm.Buffer, off, n int, op comm.Op, root int) error {
	c.record("Reduce", b, off, n, op, root)
	if err := c.joined("reduce"); err != nil {
		return err
	}
	return c.reduceInto(b, off, off+n, op, c.pe == root)
}
func (c *worldComm) ReduceScatter(b comm.Buffer, off, n int, op comm.Op) error {
	c.record("ReduceScatter", b, off, n, op)
	if err := c.joined("reducescatter"); err != nil {
		return err
	}
	return c.reduceScatter(b, off, n, op)
}
func (c *worldComm) reduceScatter(b comm.Buffer, off, n int, op comm.Op) error {
	lo, hi := comm.Shard(off, n, c.w.npes, c.pe)
	return c.reduceInto(b, lo, hi, op, true)
}
func (c *worldComm) IReduceScatter(b comm.Buffer, off, n, lo, hi int, op comm.Op) (comm.Request, error) {
	c.record("IReduceScatter", b, off, n, lo, hi, op)
	if err := c.joined("ireducescatter"); err != nil {
		return nil, err
	}
	return doneReq{}, c.reduceScatterPart(b, off, n, lo, hi, op)
}
func (c *worldComm) reduceScatterPart(b comm.Buffer, off, n, lo, hi int, op comm.Op) error {
	plo, phi := comm.PartShard(off, n, c.w.npes, c.pe, lo, hi)
	return c.reduceInto(b, plo, phi, op, true)
}
func (c *worldComm) ReduceScatterEnqueue(b comm.Buffer, off, n int, op comm.Op) error {
	c.record("ReduceScatterEnqueue", b, off, n, op)
	return c.enqueue(func() error { return c.reduceScatter(b, off, n, op) })
}
func (c *worldComm) ReduceScatterPartEnqueue(b comm.Buffer, off, n, lo, hi int, op comm.Op) error {
	c.record("ReduceScatterPartEnqueue", b, off, n, lo, hi, op)
	return c.enqueue(func() error { return c.reduceScatterPart(b, off, n, lo, hi, op) })
}

// enqueue puts a collective on the PE's emulated device (run now, or
// recorded into the graph being captured); a failure when it runs panics.
func (c *worldComm) enqueue(op func() error) error {
	c.w.devs[c.pe].Enqueue(func() {
		if err := op(); err != nil {
			panic(fmt.Sprintf("world: PE %d: an enqueued collective failed: %v", c.pe, err))
		}
	})
	return nil
}

// joined fails op, a collective that waits on the host, while the
// collectives stream is forked (as comm/nvshmem does).
func (c *worldComm) joined(op string) error {
	if c.w.forked[c.pe] {
		return fmt.Errorf("world: PE %d: %s while the collectives stream is forked", c.pe, op)
	}
	return nil
}

func (c *worldComm) CommFork() error {
	c.record("CommFork")
	c.w.forked[c.pe] = true
	c.w.forks[c.pe]++
	return nil
}

func (c *worldComm) CommJoin() error {
	c.record("CommJoin")
	if !c.w.forked[c.pe] {
		return fmt.Errorf("world: PE %d: join without a fork", c.pe)
	}
	c.w.forked[c.pe] = false
	return nil
}

// traceSlotsEmulated is the emulated trace's slots (the library's number).
const traceSlotsEmulated = 4096

func (c *worldComm) TraceStamp(onComm bool, slot int) error {
	if onComm && !c.w.forked[c.pe] {
		return fmt.Errorf("world: PE %d: a stamp on the collectives stream without a fork", c.pe)
	}
	if slot < 0 || slot >= traceSlotsEmulated {
		return fmt.Errorf("world: PE %d: trace slot %d", c.pe, slot)
	}
	pe := c.pe
	c.w.devs[pe].Enqueue(func() {
		c.w.clock[pe]++
		c.w.trace[pe][slot] = c.w.clock[pe]
	})
	return nil
}

func (c *worldComm) TraceRead(out []uint64) error {
	copy(out, c.w.trace[c.pe])
	return nil
}

// copyFrom copies elements [lo, hi) of b from PE pe's copy into this PE's.
func (c *worldComm) copyFrom(b comm.Buffer, lo, hi, pe int) {
	s := b.Kind().Size()
	copy(c.on(b, c.pe).b[lo*s:hi*s], c.on(b, pe).b[lo*s:hi*s])
}

func (c *worldComm) Broadcast(b comm.Buffer, off, n int, root int) error {
	c.record("Broadcast", b, off, n, root)
	if err := c.joined("broadcast"); err != nil {
		return err
	}
	c.w.barrier()
	if c.pe != root {
		c.copyFrom(b, off, off+n, root)
	}
	c.w.barrier()
	return nil
}
func (c *worldComm) AllGather(b comm.Buffer, off, n int) error {
	c.record("AllGather", b, off, n)
	if err := c.joined("allgather"); err != nil {
		return err
	}
	return c.allGather(b, off, n)
}
func (c *worldComm) allGather(b comm.Buffer, off, n int) error {
	c.w.barrier()
	for pe := range c.w.npes {
		if pe != c.pe {
			lo, hi := comm.Shard(off, n, c.w.npes, pe)
			c.copyFrom(b, lo, hi, pe)
		}
	}
	c.w.barrier()
	return nil
}
func (c *worldComm) AllGatherEnqueue(b comm.Buffer, off, n int) error {
	c.record("AllGatherEnqueue", b, off, n)
	return c.enqueue(func() error { return c.allGather(b, off, n) })
}
