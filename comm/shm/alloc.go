package shm

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
)

// Alloc collectively allocates n zeroed elements of kind on every PE.
//
// Every PE publishes its request in its slot and meets the others in a
// barrier; each then compares every request with PE 0's, so PEs that asked
// for different things all fail with the same comm.ErrSizeMismatch. The
// deterministic allocator then gives the same offset everywhere; each PE
// reserves and zeroes its own copy, and a second barrier makes sure no peer
// writes into a copy before its owner has zeroed it.
func (c *Comm) Alloc(kind comm.Kind, n int) (comm.Buffer, error) {
	const op = "alloc"
	if err := c.collective(op); err != nil {
		return nil, err
	}
	if err := backend.CheckAlloc(Name, c.me, kind, n); err != nil {
		return nil, err
	}
	seq, r := c.publish(reqAlloc, uint64(kind), uint64(n))
	if err := c.enter(op, desync.Call{Op: desync.Alloc}); err != nil {
		return nil, err
	}
	if err := c.agree(op, seq); err != nil {
		return nil, err
	}
	b := &buffer{c: c, kind: kind, n: n}
	if n > 0 {
		if int64(n) > (math.MaxInt64-bufAlign)/int64(kind.Size()) {
			return nil, c.exhausted(op, kind, n, math.MaxInt64)
		}
		bytes := int64(n) * int64(kind.Size())
		b.size = roundUp(bytes, bufAlign)
		off, ok := c.heap.alloc(b.size)
		if !ok {
			return nil, c.exhausted(op, kind, n, bytes)
		}
		b.off = off
		if err := c.seg.reserve(c.me, off, b.size); err != nil {
			var errno unix.Errno
			if !errors.As(err, &errno) {
				errno = unix.EIO
			}
			r.status.Store(uint64(errno))
		} else {
			clear(c.bytes(b, c.me))
		}
	}
	if err := c.barrier(op); err != nil {
		return nil, err
	}
	if n > 0 {
		if err := c.reserved(op, seq, kind, n); err != nil {
			c.heap.release(b.off, b.size)
			return nil, err
		}
	}
	c.allocs++
	b.id = c.allocs
	return b, nil
}

// Free collectively releases b on every PE. A buffer that is not a live
// allocation of this Comm gives comm.ErrNotSymmetric (without a collective);
// PEs that free different buffers all get comm.ErrSizeMismatch and nothing is
// freed.
func (c *Comm) Free(b comm.Buffer) error {
	const op = "free"
	if err := c.collective(op); err != nil {
		return err
	}
	sb, err := c.lookup(op, b)
	if err != nil {
		return err
	}
	seq, _ := c.publish(reqFree, uint64(sb.off), uint64(sb.size))
	if err := c.enter(op, desync.Call{Op: desync.Free}); err != nil {
		return err
	}
	if err := c.agree(op, seq); err != nil {
		return err
	}
	sb.freed = true
	if sb.size > 0 {
		c.heap.release(sb.off, sb.size)
	}
	return nil
}

// publish writes this PE's next collective request into its slot.
func (c *Comm) publish(op, a, b uint64) (uint64, *collReq) {
	c.reqSeq++
	seq := c.reqSeq
	r := &c.seg.slot(c.me).req[seq&1]
	r.op.Store(op)
	r.a.Store(a)
	r.b.Store(b)
	r.status.Store(0)
	r.seq.Store(seq)
	return seq, r
}

// agree compares every PE's request seq with PE 0's. Every PE reads the same
// slots after the same barrier, so every PE reaches the same verdict.
func (c *Comm) agree(op string, seq uint64) error {
	ref := &c.seg.slot(0).req[seq&1]
	var odd []int
	for q := 1; q < c.npes; q++ {
		r := &c.seg.slot(q).req[seq&1]
		if r.seq.Load() != ref.seq.Load() || r.op.Load() != ref.op.Load() || r.a.Load() != ref.a.Load() || r.b.Load() != ref.b.Load() {
			odd = append(odd, q)
		}
	}
	if len(odd) == 0 {
		return nil
	}
	parts := []string{"PE 0 " + describe(ref)}
	for _, q := range odd {
		parts = append(parts, fmt.Sprintf("PE %d %s", q, describe(&c.seg.slot(q).req[seq&1])))
	}
	return fmt.Errorf("shm: PE %d: %s: %s: %w", c.me, op, strings.Join(parts, ", "), comm.ErrSizeMismatch)
}

func describe(r *collReq) string {
	switch r.op.Load() {
	case reqAlloc:
		return fmt.Sprintf("allocates %s×%d", comm.Kind(r.a.Load()), r.b.Load())
	case reqFree:
		return fmt.Sprintf("frees the %d-byte buffer at offset %d", r.b.Load(), r.a.Load())
	}
	return "is in another collective"
}

func (c *Comm) exhausted(op string, kind comm.Kind, n int, bytes int64) error {
	return fmt.Errorf("shm: PE %d: %s: %s×%d (%d bytes): %d bytes free of the %d-byte heap, largest free block %d (raise %s): %w",
		c.me, op, kind, n, bytes, c.heap.freeBytes(), c.heap.size, c.heap.largest(), comm.EnvHeapSize, comm.ErrHeapExhausted)
}

// reserved returns an error if any PE could not reserve memory for request
// seq (a full /dev/shm).
func (c *Comm) reserved(op string, seq uint64, kind comm.Kind, n int) error {
	for q := 0; q < c.npes; q++ {
		st := c.seg.slot(q).req[seq&1].status.Load()
		if st == 0 {
			continue
		}
		failed := fmt.Sprintf("shm: PE %d: %s: %s×%d: PE %d could not reserve its copy in %s", c.me, op, kind, n, q, comm.HeapDir())
		errno := unix.Errno(st)
		if errno == unix.ENOSPC {
			return &dirFullError{msg: fmt.Sprintf("%s: %v (the directory is full: free space in it, or set %s to a directory with room)",
				failed, errno, comm.EnvHeapDir)}
		}
		return fmt.Errorf("%s: %v: %w", failed, errno, comm.ErrHeapExhausted)
	}
	return nil
}

// dirFullError is an allocation that the heap directory's file system had
// no room for. It says so, not "symmetric heap exhausted", which would point
// at the heap size; it still wraps comm.ErrHeapExhausted (the memory the
// caller asked for is not there, whatever the cause) and unix.ENOSPC.
type dirFullError struct{ msg string }

func (e *dirFullError) Error() string   { return e.msg }
func (e *dirFullError) Unwrap() []error { return []error{unix.ENOSPC, comm.ErrHeapExhausted} }
