package nvshmem

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/internal/cudalib"
)

// Desync detection (docs/FAULTS.md, "Desync"). Every collective numbers its
// call and encodes it (desync.Call), as shm and mpi do; how the PEs compare
// their calls depends on how they meet:
//
//   - every peer in pointer reach (one host): the call goes into the
//     arguments of the flag kernels that the collective enqueues
//     (Lib.SetCall), and each kernel block publishes it beside its flag at
//     its entry barrier and compares every peer's after it
//     (cuda/sd_flags.cuh). A block that finds another call stops before
//     moving data, the wait fails with cudalib.ErrDesync, and desyncError
//     reads every PE's call back from the kernel's row of call slots. This
//     costs no round trip: the entry barrier was there already, and a
//     collective recorded into a CUDA graph keeps its call, so a replayed
//     training step is checked too;
//   - a peer out of pointer reach (another node): NVSHMEM's collectives
//     carry no call, so the collectives that wait on the host anyway
//     (Barrier, AllReduce, Reduce, Broadcast, ReduceScatter, AllGather,
//     Alloc, Free, Close, the timings) first gather every PE's call with
//     one small allgather of control words and compare them, as mpi does.
//     IAllReduce and the Enqueue calls, which must not wait, are not
//     checked there.
//
// A mismatch fails the collective on every PE with the same description
// (desync.Check) wrapping comm.ErrDesync, and the runtime stays unusable.

// The check needs the words of a call to be the library's.
var (
	_ [desync.Words - cudalib.CallWords]struct{}
	_ [cudalib.CallWords - desync.Words]struct{}
)

// checkTag marks the word with which the PEs agree on the check at open.
const checkTag = 0xde5c << 16

// agreeOpen makes sure that every PE of the job has the desync check on,
// or every PE off: a PE that checks would take a peer that does not for a
// desync. One allgather at open; every PE sees every PE's setting, so all
// fail alike. The same allgather carries each PE's place (placeWord), from
// which every PE learns alike whether some PEs share a GPU (SharesDevice).
func (c *Comm) agreeOpen(check bool) error {
	mine := uint64(checkTag)
	if check {
		mine |= 1
	}
	if err := c.lib.AllGatherU64Enqueue([]uint64{mine, placeWord(hostName(), c.info.Device)}); err != nil {
		return c.libErr("open", err)
	}
	if err := c.waitStream("open"); err != nil {
		return err
	}
	all := make([]uint64, 2*c.npes)
	if err := c.lib.AllGatherU64Result(all, 2); err != nil {
		return c.libErr("open", err)
	}
	checks, places := make([]uint64, c.npes), make([]uint64, c.npes)
	for pe := range c.npes {
		checks[pe], places[pe] = all[2*pe], all[2*pe+1]
	}
	c.sharesDevice = placesShared(places)
	return checkAgreement(c.me, check, checks)
}

// hostName is this host's name, "" when the system does not tell it.
func hostName() string {
	h, _ := os.Hostname()
	return h
}

// placeWord names the GPU a PE runs on: the FNV-1a hash of its host's name
// and the device number on that host. Two PEs with the same word share a
// GPU. (A device number is as CUDA numbers the devices the process sees: PEs
// whose CUDA_VISIBLE_DEVICES differ may be taken to share a GPU when they do
// not, which only costs SharesDevice's users their overlap.)
func placeWord(host string, device int) uint64 {
	h := fnv.New32a()
	h.Write([]byte(host))
	return uint64(h.Sum32())<<32 | uint64(uint32(device))
}

// placesShared reports whether two of the PEs' place words are the same.
func placesShared(places []uint64) bool {
	seen := make(map[uint64]bool, len(places))
	for _, w := range places {
		if seen[w] {
			return true
		}
		seen[w] = true
	}
	return false
}

// checkAgreement is agreeOpen's verdict on PE me (its check on or off)
// over every PE's gathered word.
func checkAgreement(me int, check bool, all []uint64) error {
	state := func(on bool) string {
		if on {
			return "on"
		}
		return "off"
	}
	for pe, w := range all {
		if on := w == checkTag|1; on != check || w&^1 != checkTag {
			return fmt.Errorf("nvshmem: PE %d: the desync check is %s here and %s on PE %d (set %s alike for every PE)",
				me, state(check), state(on), pe, comm.EnvDesyncCheck)
		}
	}
	return nil
}

// enter numbers collective call and, with the desync check on, hands its
// fingerprint to the library (every peer in pointer reach) or, when a peer
// is out of pointer reach and the caller waits on the host anyway (waits),
// compares it with every peer's at once. The caller has checked that the
// Comm is healthy.
func (c *Comm) enter(op string, call desync.Call, waits bool) error {
	if !c.check {
		return nil
	}
	c.calls++
	call.Seq = c.calls
	w := call.Encode()
	if c.info.AllReachable {
		if err := c.lib.SetCall(w); err != nil {
			return c.fail(c.libErr(op, err))
		}
		return nil
	}
	if !waits {
		return nil
	}
	return c.compareOnHost(op, w)
}

// compareOnHost gathers every PE's call w (one allgather of control words
// through NVSHMEM) and compares them; every PE gets the same words, so every
// PE reaches the same verdict.
func (c *Comm) compareOnHost(op string, w [desync.Words]uint64) error {
	if err := c.lib.AllGatherU64Enqueue(w[:]); err != nil {
		return c.fail(c.libErr(op, err))
	}
	if err := c.waitStream(op); err != nil {
		return err
	}
	if len(c.callBuf) != desync.Words*c.npes {
		c.callBuf = make([]uint64, desync.Words*c.npes)
	}
	if err := c.lib.AllGatherU64Result(c.callBuf, desync.Words); err != nil {
		return c.fail(c.libErr(op, err))
	}
	calls := make([]desync.Call, c.npes)
	same := true
	for q := range calls {
		theirs := [desync.Words]uint64(c.callBuf[q*desync.Words:])
		same = same && theirs == w
		calls[q] = desync.Decode(theirs)
	}
	if same {
		return nil
	}
	return c.abandon(c.describe(op, calls))
}

// meetEmpty enqueues what a collective of no elements needs with the
// desync check on: the library launches no kernel for it, so a peer in
// another collective would wait for this PE until the deadline; a barrier
// carrying the call meets it instead. Nothing without the check.
func (c *Comm) meetEmpty(op string) error {
	if !c.check || !c.info.AllReachable {
		return nil
	}
	if err := c.lib.BarrierEnqueue(); err != nil {
		return c.fail(c.libErr(op, err))
	}
	return nil
}

// desyncError describes the desync a kernel of op found (libErr, wrapping
// cudalib.ErrDesync): every PE's call as the library read them from the
// kernel's row of call slots, or, if they cannot be read, the library's own
// words.
func (c *Comm) desyncError(op string, libErr error) error {
	calls, err := c.desyncCalls()
	if err != nil {
		return fmt.Errorf("nvshmem: PE %d: %s: %w (the calls cannot be read: %v): %w", c.me, op, libErr, err, comm.ErrDesync)
	}
	return c.describe(op, calls)
}

// pastDesync is the desync that a kernel found earlier, as desyncError
// describes it, or nil when the library has none on record.
func (c *Comm) pastDesync(op string) error {
	calls, err := c.desyncCalls()
	if err != nil {
		return nil
	}
	return c.describe(op, calls)
}

// desyncCalls is every PE's call where a kernel found a desync, as the
// library recorded them; an error when it recorded none.
func (c *Comm) desyncCalls() ([]desync.Call, error) {
	words, _, err := c.lib.DesyncInfo(c.npes)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, errors.New("no desync on record")
	}
	calls := make([]desync.Call, len(words))
	for q, w := range words {
		calls[q] = desync.Decode(w)
	}
	return calls, nil
}

// describe is the error of a desync among calls (every PE's, in PE order).
func (c *Comm) describe(op string, calls []desync.Call) error {
	if err := desync.Check(fmt.Sprintf("nvshmem: PE %d: %s", c.me, op), calls); err != nil {
		return err
	}
	// Only words that changed between the comparison and this reading do
	// that: a peer broke the protocol.
	return fmt.Errorf("nvshmem: PE %d: %s: PEs called different collectives, but their calls read back alike: %w",
		c.me, op, comm.ErrDesync)
}

// abandon records err as the reason the runtime is unusable and tells the
// library, so that it refuses collectives and does not wait for peers when
// finalizing.
func (c *Comm) abandon(err error) error {
	_ = c.lib.Abandon()
	return c.fail(err)
}
