package nvshmem

import (
	"errors"
	"fmt"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/cudalib"
)

// Polling of GPU work and signal words.
const (
	// hostGrace is how much longer than the in-kernel deadline the host
	// waits for GPU work, so that a kernel that gave up reports first (with
	// the PEs it missed).
	hostGrace = 2 * time.Second
	spinFor   = 50 * time.Microsecond // poll without sleeping at first
	minNap    = 20 * time.Microsecond
	maxNap    = time.Millisecond
)

// waitStream waits for everything enqueued on the library's stream.
func (c *Comm) waitStream(op string) error {
	return c.poll(op, c.lib.StreamQuery, true)
}

// barrier enqueues a barrier and waits for it.
func (c *Comm) barrier(op string) error {
	if err := c.lib.BarrierEnqueue(); err != nil {
		return c.fail(c.libErr(op, err))
	}
	return c.waitStream(op)
}

// poll calls ready until it reports true, fails, the deadline passes, or a
// peer process has gone. For GPU work (device) a failure leaves the runtime
// unusable, and the library is told, so that it refuses collectives and
// does not wait for peers when finalizing.
func (c *Comm) poll(op string, ready func() (bool, error), device bool) error {
	start := time.Now()
	limit := c.timeout
	if device {
		limit += hostGrace
	}
	giveUp := func(err error) error {
		if device {
			_ = c.lib.Abandon()
			return c.fail(err)
		}
		return err
	}
	nextCheck := start.Add(checkEvery)
	gonePE, goneHow, goneAt := -1, "", time.Time{}
	var nap time.Duration
	for {
		ok, err := ready()
		if err != nil {
			return giveUp(c.libErr(op, err))
		}
		if ok {
			return nil
		}
		now := time.Now()
		if now.Sub(start) > limit {
			var missing []int
			if device {
				missing, _, _ = c.lib.TimeoutInfo(c.npes)
			}
			return giveUp(&comm.TimeoutError{PE: c.me, Op: op, Missing: missing, Deadline: c.timeout})
		}
		if now.After(nextCheck) {
			nextCheck = now.Add(checkEvery)
			if gonePE < 0 {
				if pe, how := c.peers.gone(); pe >= 0 {
					gonePE, goneHow, goneAt = pe, how, now
				}
			} else if now.Sub(goneAt) > peerGrace {
				return giveUp(fmt.Errorf("nvshmem: PE %d: %s: PE %d %s: %w", c.me, op, gonePE, goneHow, comm.ErrPeerFailed))
			}
		}
		if now.Sub(start) < spinFor {
			continue
		}
		nap = min(max(2*nap, minNap), maxNap)
		time.Sleep(nap)
	}
}

// libErr turns a library error into the comm package's terms: a
// *comm.TimeoutError naming the PEs that did not arrive, or comm.ErrDesync
// naming the PEs' calls (and the runtime unusable after either),
// comm.ErrUnavailable for a missing GPU, context otherwise.
func (c *Comm) libErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cudalib.ErrTimeout):
		missing, _, _ := c.lib.TimeoutInfo(c.npes)
		return c.fail(&comm.TimeoutError{PE: c.me, Op: op, Missing: missing, Deadline: c.timeout})
	case errors.Is(err, cudalib.ErrDesync):
		return c.fail(c.desyncError(op, err))
	case errors.Is(err, cudalib.ErrState):
		// The library refuses collectives after a failure; when a wait of
		// another caller (the compute engine's, for a training step replayed
		// from a CUDA graph) saw a desync, say that.
		if d := c.pastDesync(op); d != nil {
			return c.fail(d)
		}
	case errors.Is(err, cudalib.ErrNoDevice):
		return fmt.Errorf("nvshmem: PE %d: %s: %w: %w", c.me, op, comm.ErrUnavailable, err)
	}
	return fmt.Errorf("nvshmem: PE %d: %s: %w", c.me, op, err)
}
