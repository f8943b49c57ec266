package nvshmem

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/internal/cudalib"
)

// Name is the backend's registered name.
const Name = "nvshmem"

// DefaultHeapSize is each PE's symmetric heap when neither
// comm.Config.HeapSize nor NVSHMEM_SYMMETRIC_SIZE says otherwise (NVSHMEM's
// own default).
const DefaultHeapSize = 1 << 30

func init() {
	backend.Register(Name, New)
}

// active is set while a Comm is open in this process.
var active atomic.Bool

// Comm is one PE's handle on an NVSHMEM job. It implements comm.Comm.
type Comm struct {
	lib      *cudalib.Lib
	info     cudalib.Info
	me, npes int
	timeout  time.Duration
	stream   uintptr

	heapSize int64 // bytes the user may allocate
	heapUsed int64
	reqSeq   uint64 // collective requests (Alloc, Free) made
	bufSeq   uint64 // buffers allocated: a buffer's id, the same on every PE
	check    bool   // compare the PEs' collective calls (comm.DesyncChecking; desync.go)
	// sharesDevice: some PEs of the job run on the same GPU (agreeOpen)
	sharesDevice bool
	calls        uint64 // collectives entered with the check on: the number in desync.Call
	callBuf      []uint64

	closed  bool
	forked  bool  // CommFork without its CommJoin (overlap.go)
	broken  error // the failure that made collectives unusable
	pending []*request
	boot    bootstrap
	peers   peerWatch
}

var (
	_ comm.Comm         = (*Comm)(nil)
	_ comm.DeviceSharer = (*Comm)(nil)
)

// New opens the backend for one PE; see the package documentation for the
// start-up and cfg.Options. It returns once every PE has joined.
func New(cfg comm.Config) (*Comm, error) {
	boot, err := chooseBootstrap(cfg)
	if err != nil {
		return nil, err
	}
	if !active.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("nvshmem: open PE %d: %w", boot.pe, comm.ErrAlreadyInitialised)
	}
	c, err := open(cfg, boot)
	if err != nil {
		active.Store(false)
		return nil, err
	}
	return c, nil
}

func open(cfg comm.Config, boot bootstrap) (*Comm, error) {
	cfg, err := defaults(cfg)
	if err != nil {
		return nil, err
	}
	check, err := comm.DesyncChecking()
	if err != nil {
		return nil, fmt.Errorf("nvshmem: PE %d: %w", boot.pe, err)
	}
	lib, err := cudalib.Load(cfg.Options["lib"])
	if err != nil {
		return nil, fmt.Errorf("nvshmem: PE %d: %w: %w", boot.pe, comm.ErrUnavailable, err)
	}
	if _, err := lib.DeviceCount(); err != nil {
		return nil, fmt.Errorf("nvshmem: PE %d: %w: %w", boot.pe, comm.ErrUnavailable, err)
	}
	device := -1
	if v, ok := cfg.Options["device"]; ok {
		if _, err := fmt.Sscan(v, &device); err != nil || device < 0 {
			return nil, fmt.Errorf("nvshmem: PE %d: option device=%q: want a GPU number", boot.pe, v)
		}
	}
	oneShotMax := -1 // not set
	if v, ok := cfg.Options["one_shot_max"]; ok {
		if _, err := fmt.Sscan(v, &oneShotMax); err != nil || oneShotMax < 0 {
			return nil, fmt.Errorf("nvshmem: PE %d: option one_shot_max=%q: want bytes", boot.pe, v)
		}
	}
	args := cudalib.InitArgs{
		Bootstrap:  boot.kind,
		PE:         boot.pe,
		NPEs:       boot.npes,
		LocalPE:    boot.localPE,
		Device:     device,
		SingleNode: boot.singleNode,
		HeapBytes:  cfg.HeapSize,
		Timeout:    cfg.Timeout,
	}
	if boot.kind == cudalib.UniqueID {
		if args.UID, err = exchangeUID(lib, boot, cfg.Timeout); err != nil {
			return nil, err
		}
	}
	c := &Comm{lib: lib, me: boot.pe, npes: boot.npes, timeout: cfg.Timeout, heapSize: cfg.HeapSize, boot: boot}
	c.peers.init(boot)
	if c.info, err = lib.Init(args); err != nil {
		c.peers.close()
		if errors.Is(err, cudalib.ErrState) {
			return nil, fmt.Errorf("nvshmem: open PE %d: %w: %w", boot.pe, comm.ErrAlreadyInitialised, err)
		}
		if errors.Is(err, cudalib.ErrNoDevice) {
			return nil, fmt.Errorf("nvshmem: open PE %d: %w: %w", boot.pe, comm.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("nvshmem: open PE %d: %w", boot.pe, err)
	}
	c.me, c.npes = c.info.PE, c.info.NPEs
	if c.stream, err = lib.Stream(); err != nil {
		return nil, c.abandonOpen(fmt.Errorf("nvshmem: open PE %d: %w", c.me, err))
	}
	if oneShotMax >= 0 {
		if err := lib.SetOneShotMax(oneShotMax); err != nil {
			return nil, c.abandonOpen(fmt.Errorf("nvshmem: PE %d: %w", c.me, err))
		}
	}
	if c.npes > 1 {
		if err := c.agreeOpen(check); err != nil {
			return nil, c.abandonOpen(err)
		}
		c.check = check
	}
	return c, nil
}

// abandonOpen undoes an open that failed after lib.Init succeeded: it
// finalizes the runtime locally (without meeting the peers) and removes this
// PE's files from the run directory, then returns err.
func (c *Comm) abandonOpen(err error) error {
	_ = c.lib.Finalize(false)
	c.peers.close()
	return err
}

// MyPE is this PE's number.
func (c *Comm) MyPE() int { return c.me }

// NPEs is the number of PEs in the job.
func (c *Comm) NPEs() int { return c.npes }

// Backend returns "nvshmem".
func (c *Comm) Backend() string { return Name }

// FixedOrder reports whether Sum is the float32 left fold in PE order: true
// when every PE reaches every peer by pointer (the project's kernels), false
// when NVSHMEM's own reductions stand in for peers on other nodes.
func (c *Comm) FixedOrder() bool { return c.info.AllReachable }

// Stream is the CUDA stream (a cudaStream_t) the collectives run on: device
// work enqueued on it is ordered with them.
func (c *Comm) Stream() uintptr { return c.stream }

// SharesDevice reports whether some PEs of the job run on the same GPU (under
// MPS, or taking turns): the same answer on every PE, agreed at open.
func (c *Comm) SharesDevice() bool { return c.sharesDevice }

// Info describes the GPU, NVSHMEM and the runtime's choices on this PE.
func (c *Comm) Info() cudalib.Info { return c.info }

// Library is the loaded GPU library, for the compute engine that shares it.
func (c *Comm) Library() *cudalib.Lib { return c.lib }

// HeapFree is how many bytes of the symmetric heap are not allocated.
func (c *Comm) HeapFree() int64 { return c.heapSize - c.heapUsed }

// Close ends this PE's part of the job: it waits for outstanding
// IAllReduce requests, meets the other PEs in a last barrier (skipped after
// a failure; bounded by the deadline) and finalizes NVSHMEM, which cannot be
// started again in this process. Every later call returns an error wrapping
// comm.ErrClosed.
func (c *Comm) Close() error {
	if c.closed {
		return c.closedErr("close")
	}
	var err error
	if c.forked {
		err = c.CommJoin() // the last barrier goes on the stream
	}
	for len(c.pending) > 0 {
		if werr := c.pending[0].Wait(); werr != nil && err == nil {
			err = werr
		}
	}
	collective := c.broken == nil
	if collective {
		berr := c.enter("close", desync.Call{Op: desync.Close}, true)
		if berr == nil {
			berr = c.barrier("close")
		}
		if berr != nil {
			err, collective = berr, false
		}
	}
	if ferr := c.lib.Finalize(collective); ferr != nil && err == nil {
		err = ferr
	}
	c.closed = true
	c.peers.close()
	active.Store(false)
	if err != nil {
		return fmt.Errorf("nvshmem: PE %d: close: %w", c.me, err)
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
	return fmt.Errorf("nvshmem: PE %d: %s: %w", c.me, op, comm.ErrClosed)
}

// collective prepares a collective: the Comm must be open and healthy.
// Collectives need no draining of IAllReduce requests: they are all on one
// CUDA stream, in the order they were issued.
func (c *Comm) collective(op string) error {
	if err := c.usable(op); err != nil {
		return err
	}
	if c.broken != nil {
		return fmt.Errorf("nvshmem: PE %d: %s: runtime unusable after an earlier failure: %w", c.me, op, c.broken)
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
