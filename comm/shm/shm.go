// Package shm is symddp's CPU comm backend for the PEs of one host: every PE
// is an OS process, and the symmetric heap is one file under /dev/shm (or
// os.TempDir() when /dev/shm is missing) that every PE maps MAP_SHARED.
//
// The file holds a small control area (barrier words, one slot per PE) and
// then every PE's copy of the heap, so a buffer is at the same offset in every
// copy and one-sided operations are plain copies into a peer's copy. Barriers
// are atomics in the control area: a waiter spins briefly when there are no
// more PEs than CPUs, yields its CPU for a moment, then sleeps on a futex,
// checking every 150 ms that the PEs it waits for are alive. AllReduce is a reduce-scatter and an all-gather
// done in place: PE p sums its 1/NPEs slice of every peer's copy in PE order
// 0..NPEs-1 and writes the result into every copy, so every PE ends with the
// same bits (Comm.FixedOrder reports true).
//
// The package registers itself as backend "shm"; import it for its side
// effect and call comm.Open("shm", cfg). With cfg.NPEs == 1 and no heap name
// it runs in one process with a private heap, no launcher needed; a job of
// several PEs is started by comm/launch, which creates the heap file.
package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/comm/internal/orderq"
)

// Name is the backend's registered name.
const Name = "shm"

// DefaultHeapSize is each PE's heap size when comm.Config.HeapSize is zero.
// Memory is taken only for what is allocated.
const DefaultHeapSize = 1 << 30

func init() {
	backend.Register(Name, New)
}

// active is set while a Comm is open in this process.
var active atomic.Bool

// Comm is one PE's handle on a shm job. It implements comm.Comm.
type Comm struct {
	me, npes int
	timeout  time.Duration
	seg      *segment
	heap     allocator
	spin     bool // spin before sleeping: no more PEs than CPUs

	epoch  uint64 // barriers entered
	reqSeq uint64 // collective requests (Alloc, Free) made
	allocs uint64 // Allocs made: a buffer's number in desync.Call
	check  bool   // compare the PEs' collective calls (comm.DesyncChecking)
	calls  uint64 // collectives entered: the number in desync.Call
	closed bool
	broken error // the failure that made collectives unusable

	peers peerWatch

	// Reduction scratch, allocated once: one chunk of results and every
	// PE's view of the buffer being reduced.
	scratch []float32
	views   [][]float32
	ins     [][]float32

	async orderq.Queue[asyncArgs]
	fence atomic.Uint64
}

var _ comm.Comm = (*Comm)(nil)

// New opens the shm backend for one PE: cfg.PE of cfg.NPEs (zero means 1),
// heap file cfg.HeapName (an absolute path, or a name under comm.HeapDir();
// empty for a one-PE job with a private heap), cfg.HeapSize bytes of heap per
// PE and cfg.Timeout for every wait. It returns once every PE has joined.
func New(cfg comm.Config) (*Comm, error) {
	if cfg.NPEs == 0 {
		cfg.NPEs = 1
	}
	if cfg.NPEs < 0 || cfg.NPEs > maxNPEs {
		return nil, fmt.Errorf("shm: %d PEs: want 1 to %d", cfg.NPEs, maxNPEs)
	}
	if err := comm.CheckPE("shm: open", cfg.PE, cfg.NPEs); err != nil {
		return nil, err
	}
	cfg, err := backend.Defaults(Name, cfg, DefaultHeapSize)
	if err != nil {
		return nil, err
	}
	path := cfg.HeapName
	if path == "" && cfg.NPEs > 1 {
		return nil, fmt.Errorf("shm: a job of %d PEs needs a shared heap file (%s): start it with the launcher (comm/launch)", cfg.NPEs, comm.EnvHeap)
	}
	if path != "" && !filepath.IsAbs(path) {
		path = filepath.Join(comm.HeapDir(), path)
	}
	if !active.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("shm: open PE %d: %w", cfg.PE, comm.ErrAlreadyInitialised)
	}
	c, err := open(cfg, path)
	if err != nil {
		active.Store(false)
		return nil, err
	}
	return c, nil
}

func open(cfg comm.Config, path string) (*Comm, error) {
	check, err := comm.DesyncChecking()
	if err != nil {
		return nil, fmt.Errorf("shm: PE %d: %w", cfg.PE, err)
	}
	region := roundUp(cfg.HeapSize, pageSize)
	seg, err := openSegment(path, cfg.NPEs, region, check)
	if err != nil {
		return nil, fmt.Errorf("shm: PE %d: %w", cfg.PE, err)
	}
	c := &Comm{
		me:      cfg.PE,
		npes:    cfg.NPEs,
		timeout: cfg.Timeout,
		seg:     seg,
		check:   check,
		heap:    newAllocator(region),
		spin:    cfg.NPEs <= runtime.NumCPU(),
		scratch: make([]float32, chunkLen),
		views:   make([][]float32, cfg.NPEs),
		ins:     make([][]float32, cfg.NPEs),
	}
	c.peers.init(cfg.NPEs)
	me := seg.slot(c.me)
	if !me.state.CompareAndSwap(stateAbsent, stateJoined) {
		seg.close()
		return nil, fmt.Errorf("shm: PE %d: heap %s: PE %d was already joined (pid %d); is the job started twice?",
			c.me, path, c.me, me.pid.Load())
	}
	me.pid.Store(uint64(os.Getpid()))
	if err := c.barrier("join"); err != nil {
		me.state.Store(stateClosed)
		seg.close()
		return nil, err
	}
	c.peers.open(c)
	c.startAsync()
	return c, nil
}

// MyPE is this PE's number.
func (c *Comm) MyPE() int { return c.me }

// NPEs is the number of PEs in the job.
func (c *Comm) NPEs() int { return c.npes }

// Backend returns "shm".
func (c *Comm) Backend() string { return Name }

// FixedOrder reports true: Sum adds the PEs' values in PE order 0..NPEs-1.
func (c *Comm) FixedOrder() bool { return true }

// HeapFree returns how many bytes of this PE's heap are not allocated.
func (c *Comm) HeapFree() int64 { return c.heap.freeBytes() }

// Close ends this PE's part of the job: it waits for outstanding IAllReduce
// requests, meets the other PEs in a last barrier (skipped when an earlier
// wait failed; bounded by the deadline) and unmaps the heap. Every later call
// returns an error wrapping comm.ErrClosed.
func (c *Comm) Close() error {
	if c.closed {
		return c.closedErr("close")
	}
	c.async.Stop()
	var err error
	if c.broken == nil {
		err = c.enter("close", desync.Call{Op: desync.Close})
	}
	c.seg.slot(c.me).state.Store(stateClosed)
	c.closed = true
	c.peers.close()
	err = errors.Join(err, c.seg.close())
	active.Store(false)
	if err != nil {
		return fmt.Errorf("shm: PE %d: close: %w", c.me, err)
	}
	return nil
}

// usable returns the error that op must fail with when the Comm is closed.
func (c *Comm) usable(op string) error {
	if c.closed {
		return c.closedErr(op)
	}
	return nil
}

func (c *Comm) closedErr(op string) error {
	return fmt.Errorf("shm: PE %d: %s: %w", c.me, op, comm.ErrClosed)
}

// collective prepares a collective: the Comm must be open and healthy, and
// every IAllReduce issued before must be complete, so that collectives run in
// the order they were issued.
func (c *Comm) collective(op string) error {
	if err := c.usable(op); err != nil {
		return err
	}
	c.async.Drain()
	return c.healthy(op)
}

func (c *Comm) healthy(op string) error {
	if c.broken != nil {
		return fmt.Errorf("shm: PE %d: %s: runtime unusable after an earlier failure: %w", c.me, op, c.broken)
	}
	return nil
}

// fail records err as the reason the runtime is unusable and returns it.
func (c *Comm) fail(err error) error {
	if c.broken == nil {
		c.broken = err
	}
	return err
}
