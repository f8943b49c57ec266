package nvshmem

import (
	"fmt"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/internal/cudalib"
)

// The collectives stream: reductions overlapped with compute (ddp's device
// step path reducing gradient buckets while backward runs). CommFork orders
// the library's collectives stream after the work enqueued on Stream() so
// far, and until CommJoin every collective goes there, each behind a
// one-block arrival barrier of all PEs; CommJoin orders Stream() after it.
// Between the two only the Enqueue collectives may be called: the others
// wait on the host for Stream() or record events on it, so they fail (the
// library refuses its blocking entry points too). cuda/sd_overlap.cu says
// why this cannot hang where a plain second stream did.

// CommFork orders the collectives stream after everything enqueued on
// Stream() so far and sends the Enqueue collectives there until CommJoin.
// Called again before CommJoin (a gradient bucket that backward has just
// finished), it orders the collectives stream after Stream()'s work so far
// once more. It may be recorded into a CUDA graph. It needs every peer in
// pointer reach (FixedOrder).
func (c *Comm) CommFork() error {
	const name = "comm_fork"
	if err := c.collective(name); err != nil {
		return err
	}
	if err := c.lib.CommFork(); err != nil {
		return c.fail(c.libErr(name, err))
	}
	c.forked = true
	return nil
}

// CommJoin makes Stream() wait for everything enqueued on the collectives
// stream and sends collectives to Stream() again. It fails when not forked.
func (c *Comm) CommJoin() error {
	const name = "comm_join"
	if err := c.usable(name); err != nil {
		return err
	}
	if !c.forked {
		return fmt.Errorf("nvshmem: PE %d: %s: the collectives stream is not forked", c.me, name)
	}
	c.forked = false
	if err := c.lib.CommJoin(); err != nil {
		return c.fail(c.libErr(name, err))
	}
	return nil
}

// Forked reports whether the collectives stream is forked (CommFork without
// its CommJoin).
func (c *Comm) Forked() bool { return c.forked }

// joined fails op, a collective that waits on the host or records an event
// on Stream(), while the collectives stream is forked.
func (c *Comm) joined(op string) error {
	if c.forked {
		return fmt.Errorf("nvshmem: PE %d: %s: the collectives stream is forked (CommFork): only the Enqueue collectives may be called before CommJoin", c.me, op)
	}
	return nil
}

// ReduceScatterPartEnqueue enqueues IReduceScatter's reduce-scatter of the
// part [lo, hi) of elements [off, off+n) of the Float32 or BFloat16 buffer
// b and returns at once, with no event and no host wait (so that a CUDA
// graph can hold it): each PE's piece of the part (comm.PartShard) ends with
// the bits one ReduceScatter of [off, off+n) gives it. The kernel's grid is
// sized by the largest piece of any PE, the same on every PE.
func (c *Comm) ReduceScatterPartEnqueue(b comm.Buffer, off, n, lo, hi int, op comm.Op) error {
	return c.enqueueReduceScatterPart("reducescatter_part", b, off, n, lo, hi, op)
}

// enqueueReduceScatterPart checks and enqueues the reduce-scatter of part
// [lo, hi) (ReduceScatterPartEnqueue, IReduceScatter): the kernel, or, with
// a peer out of pointer reach, one Reduce per PE of its piece to it.
func (c *Comm) enqueueReduceScatterPart(name string, b comm.Buffer, off, n, lo, hi int, op comm.Op) error {
	sb, dt, cop, err := c.reduceArgs(name, b, off, n, op, c.me)
	if err != nil {
		return err
	}
	if err := backend.CheckPart(Name, c.me, name, b, off, n, lo, hi); err != nil {
		return err
	}
	call := sb.call(desync.ReduceScatterPart, lo, hi-lo, op, 0)
	call.Sharding = desync.ShardingOf(off, n)
	return c.enqueueSharded(name, call, false, hi-lo,
		func(p int) (int, int) { return comm.PartShard(off, n, c.npes, p, lo, hi) },
		func(plo, phi, span int) error { return c.lib.ReduceScatterEnqueue(sb.sym, plo, phi, span, dt, cop) },
		func(p, plo, phi int) error { return c.lib.ReduceEnqueue(sb.sym, plo, phi-plo, dt, cop, p) })
}

// TraceSlots is the number of slots of the overlap trace (TraceStamp).
const TraceSlots = cudalib.TraceSlots

// TraceStamp enqueues a write of the GPU's nanosecond clock into slot of the
// library's trace, on Stream() or (onComm, while forked) on the
// collectives stream; it may be recorded into a CUDA graph. A debugging aid
// (ddp's SYMDDP_OVERLAP_TRACE): TraceRead reads the slots back.
func (c *Comm) TraceStamp(onComm bool, slot int) error {
	const name = "trace_stamp"
	if err := c.usable(name); err != nil {
		return err
	}
	if err := c.lib.TraceStamp(onComm, slot); err != nil {
		return c.libErr(name, err)
	}
	return nil
}

// TraceRead reads slots [0, len(out)) of the trace into out; the work that
// wrote them must be done (wait for it first).
func (c *Comm) TraceRead(out []uint64) error {
	const name = "trace_read"
	if err := c.usable(name); err != nil {
		return err
	}
	if err := c.lib.TraceRead(out); err != nil {
		return c.libErr(name, err)
	}
	return nil
}
