//go:build mpi

package mpi

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/comm/internal/orderq"
)

// Name is the backend's registered name.
const Name = "mpi"

// DefaultHeapSize is each PE's heap size when comm.Config.HeapSize is zero:
// the total of the live allocations may not exceed it. Memory is taken only
// for what is allocated.
const DefaultHeapSize = 1 << 30

func init() {
	backend.Register(Name, New)
}

// maxMPICount is the largest count ReduceScatter and AllGather pass to MPI:
// MPI's int. Tests lower it (export_test.go) so that small buffers take the
// paths of shards past it.
var maxMPICount int64 = math.MaxInt32

// state guards MPI's once-per-process life: MPI can be initialised once,
// and not again after MPI_Finalize.
var state struct {
	sync.Mutex
	used bool
}

// Comm is one PE's handle on an MPI job. It implements comm.Comm.
type Comm struct {
	me, npes int
	timeout  time.Duration
	version  string

	// mu serialises every MPI call (MPI_THREAD_SERIALIZED) and guards the
	// fields below it.
	mu       sync.Mutex
	heapSize int64
	heapUsed int64
	nextID   uint64
	live     map[uint64]*buffer // live allocations by id
	dirty    map[*buffer]bool   // buffers with puts not yet flushed
	broken   error
	closed   atomic.Bool // set under mu, read without it

	arrivals arrivals
	check    bool     // compare the PEs' collective calls (comm.DesyncChecking)
	calls    uint64   // collectives entered: the number in desync.Call
	callBuf  []uint64 // every PE's encoded desync.Call, then this PE's (checkCall's scratch)
	hier     hierarchy
	wd       watchdog
	async    orderq.Queue[asyncArgs]
	thread   *initThread

	// ReduceScatter and AllGather's MPI counts and scratch (under mu), and
	// the largest count they pass to MPI (maxMPICount)
	counts, displs []int32
	scratch        []float32
	maxCount       int64
}

var _ comm.Comm = (*Comm)(nil)

// New initialises MPI and opens the backend for this process, which must have
// been started by an MPI launcher (mpirun, mpiexec, srun). cfg.PE and
// cfg.NPEs, when set, must match MPI_COMM_WORLD's rank and size;
// cfg.HeapSize bounds the live allocations (default DefaultHeapSize);
// cfg.Timeout is the deadline of every wait (default comm.DefaultTimeout).
func New(cfg comm.Config) (*Comm, error) {
	cfg, err := backend.Defaults(Name, cfg, DefaultHeapSize)
	if err != nil {
		return nil, err
	}
	check, err := comm.DesyncChecking()
	if err != nil {
		return nil, fmt.Errorf("mpi: open: %w", err)
	}
	state.Lock()
	defer state.Unlock()
	if state.used {
		return nil, fmt.Errorf("mpi: open: MPI was initialised in this process already (it cannot be initialised twice, nor after Close): %w", comm.ErrAlreadyInitialised)
	}
	th := startInitThread()
	var rank, size int
	var already bool
	th.do(func() { rank, size, already, err = cInit() })
	if already {
		th.stop()
		return nil, fmt.Errorf("mpi: open: MPI was initialised in this process by other code: %w", comm.ErrAlreadyInitialised)
	}
	state.used = true
	if err != nil {
		th.stop()
		return nil, fmt.Errorf("mpi: open: %w (was this process started by mpirun?)", err)
	}
	c := &Comm{
		me: rank, npes: size, timeout: cfg.Timeout, version: libraryVersion(),
		heapSize: cfg.HeapSize, live: map[uint64]*buffer{}, dirty: map[*buffer]bool{}, thread: th,
		maxCount: maxMPICount, check: check,
	}
	if (cfg.NPEs > 0 && cfg.NPEs != size) || (cfg.NPEs > 0 && cfg.PE != rank) {
		err := fmt.Errorf("mpi: open: configured as PE %d of %d, but MPI_COMM_WORLD says rank %d of %d", cfg.PE, cfg.NPEs, rank, size)
		c.shutdown()
		return nil, err
	}
	c.wd.start(c)
	if err := c.arrivals.open(c); err != nil {
		c.shutdown()
		return nil, explainWindowError(err) // named as c.call names it: "mpi: PE 0: open: ..."
	}
	on, hostSize, err := hierConfig(cfg)
	if err == nil {
		c.mu.Lock()
		err = c.openHierarchy(on, hostSize)
		c.mu.Unlock()
	}
	if err != nil {
		c.shutdown()
		return nil, fmt.Errorf("mpi: PE %d: %w", c.me, err)
	}
	c.startAsync()
	return c, nil
}

// shutdown finalises MPI after a failed New.
func (c *Comm) shutdown() {
	c.wd.stop()
	c.thread.do(func() { _ = cFinalize() })
	c.thread.stop()
}

// explainWindowError adds what to do when MPI cannot make a window.
func explainWindowError(err error) error {
	return fmt.Errorf("%w; MPI found no one-sided (osc) component for this job: with Open MPI over TCP between hosts, add --mca osc ^ucx to mpirun (Debian's and Ubuntu's openmpi-mca-params.conf disable osc pt2pt)", err)
}

// MyPE is this PE's number: the rank in MPI_COMM_WORLD.
func (c *Comm) MyPE() int { return c.me }

// NPEs is the number of PEs: the size of MPI_COMM_WORLD.
func (c *Comm) NPEs() int { return c.npes }

// Backend returns "mpi".
func (c *Comm) Backend() string { return Name }

// FixedOrder reports whether Sum is the float32 left fold over PEs 0, 1,
// ..., NPEs()-1: true in hierarchical mode on one host (the bits of the shm
// backend), false otherwise, where MPI chooses the order in which it adds the
// PEs' values (every PE still gets the same bits).
func (c *Comm) FixedOrder() bool {
	return c.npes == 1 || (c.hier.on && c.hier.hosts == 1 && c.hier.nlocal == c.npes)
}

// Library is the MPI library's version, e.g. "Open MPI v4.1.4".
func (c *Comm) Library() string { return c.version }

// Close ends this PE's part of the job: it waits for outstanding IAllReduce
// requests, completes outstanding puts, frees every window (collective, in
// allocation order) and finalises MPI. Like every collective it ends the job
// at the deadline when a peer never arrives. Every later call returns an
// error wrapping comm.ErrClosed.
func (c *Comm) Close() error {
	const op = "close"
	if c.closed.Load() {
		return c.closedErr(op)
	}
	c.async.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	if c.broken == nil {
		err = c.closeCollective(op)
	}
	c.closed.Store(true)
	c.wd.arm(op, waitAll)
	c.thread.do(func() { err = errors.Join(err, cFinalize()) })
	c.wd.disarm()
	c.thread.stop()
	c.wd.stop()
	if err != nil {
		return fmt.Errorf("mpi: PE %d: close: %w", c.me, err)
	}
	return nil
}

// barrierLocked completes this PE's puts and then meets the other PEs in an
// MPI barrier: what Barrier and Close (coll) both begin with. The caller
// holds mu.
func (c *Comm) barrierLocked(op string, coll desync.Coll) error {
	if err := c.quietLocked(op); err != nil {
		return err
	}
	if err := c.enter(op, desync.Call{Op: coll}); err != nil {
		return err
	}
	return c.call(op, waitAll, cBarrier)
}

// closeCollective is the part of Close that the PEs do together: complete
// the puts, meet in a barrier, free every window in allocation order and the
// hierarchy's communicators. It stops at the first failure, which has made
// the Comm broken: the peers may never arrive at a later step, which would
// then block until the watchdog ends the job. The caller holds mu.
func (c *Comm) closeCollective(op string) error {
	if err := c.barrierLocked(op, desync.Close); err != nil {
		return err
	}
	for _, b := range c.liveInOrder() {
		if err := c.freeWindow(op, b); err != nil {
			return err
		}
	}
	if err := c.closeHierarchy(op); err != nil {
		return err
	}
	return c.arrivals.close(c)
}

func (c *Comm) closedErr(op string) error {
	return fmt.Errorf("mpi: PE %d: %s: %w", c.me, op, comm.ErrClosed)
}

// usableLocked returns the error op must fail with when the Comm is closed
// or broken. The caller holds mu.
func (c *Comm) usableLocked(op string) error {
	if c.closed.Load() {
		return c.closedErr(op)
	}
	if c.broken != nil {
		return fmt.Errorf("mpi: PE %d: %s: runtime unusable after an earlier failure: %w", c.me, op, c.broken)
	}
	return nil
}

// call runs one blocking MPI operation under the watchdog: peer is the PE
// it waits for (-1: a collective, every PE). The caller holds mu. A failed
// call makes the runtime unusable.
func (c *Comm) call(op string, peer int, f func() error) error {
	c.wd.arm(op, peer)
	err := f()
	c.wd.disarm()
	if err != nil {
		return c.fail(op, err)
	}
	return nil
}

// fail wraps the error of a failed MPI call in op and records it as the
// reason the runtime is unusable. The caller holds mu.
func (c *Comm) fail(op string, err error) error {
	err = fmt.Errorf("mpi: PE %d: %s: %w", c.me, op, err)
	if c.broken == nil {
		c.broken = err
	}
	return err
}

// initThread is the locked OS thread that initialises and finalises MPI
// (MPI wants both on one thread, its "main thread").
type initThread struct {
	work chan func()
	done chan struct{}
}

func startInitThread() *initThread {
	t := &initThread{work: make(chan func()), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		defer close(t.done)
		for f := range t.work {
			f()
		}
	}()
	return t
}

// do runs f on the thread and waits for it.
func (t *initThread) do(f func()) {
	fin := make(chan struct{})
	t.work <- func() { f(); close(fin) }
	<-fin
}

func (t *initThread) stop() {
	close(t.work)
	<-t.done
}
