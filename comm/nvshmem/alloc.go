package nvshmem

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/internal/cudalib"
)

// Collective requests compared across PEs.
const (
	reqAlloc = 1
	reqFree  = 2
)

// allocAlign is the granularity of the heap accounting.
const allocAlign = 512

// Alloc collectively allocates n zeroed elements of kind on every PE.
//
// Every PE's request goes to every PE (an allgather of control words in
// symmetric memory, with the deadline), so PEs that asked for different
// things all fail with the same comm.ErrSizeMismatch before NVSHMEM's own
// collective allocation is reached. The heap is accounted for here, so a
// request past Config.HeapSize fails with comm.ErrHeapExhausted on every PE
// alike; the library then calls nvshmem_malloc, zeroes the copy and meets
// the peers in a barrier, so no peer writes into it before it is zeroed.
func (c *Comm) Alloc(kind comm.Kind, n int) (comm.Buffer, error) {
	const op = "alloc"
	if err := c.collective(op); err != nil {
		return nil, err
	}
	if err := c.joined(op); err != nil {
		return nil, err
	}
	if err := backend.CheckAlloc(Name, c.me, kind, n); err != nil {
		return nil, err
	}
	if err := c.enter(op, desync.Call{Op: desync.Alloc}, true); err != nil {
		return nil, err
	}
	c.reqSeq++
	if err := c.agree(op, []uint64{reqAlloc, c.reqSeq, uint64(kind), uint64(n)}); err != nil {
		return nil, err
	}
	if int64(n) > (math.MaxInt64-allocAlign)/int64(kind.Size()) {
		return nil, c.exhausted(op, kind, n, math.MaxInt64)
	}
	bytes := int64(n) * int64(kind.Size())
	size := (max(bytes, 1) + allocAlign - 1) / allocAlign * allocAlign
	if size > c.heapSize-c.heapUsed {
		return nil, c.exhausted(op, kind, n, bytes)
	}
	sym, err := c.lib.Alloc(int(bytes))
	if err != nil {
		if errors.Is(err, cudalib.ErrNoMemory) {
			return nil, fmt.Errorf("nvshmem: PE %d: %s: %s×%d: %w: %w", c.me, op, kind, n, comm.ErrHeapExhausted, err)
		}
		return nil, c.fail(c.libErr(op, err))
	}
	c.heapUsed += size
	c.bufSeq++
	return &buffer{c: c, kind: kind, n: n, sym: sym, size: size, id: c.bufSeq}, nil
}

// Free collectively releases b on every PE. A buffer that is not a live
// allocation of this Comm gives comm.ErrNotSymmetric (without a collective);
// PEs that free different buffers all get comm.ErrSizeMismatch and nothing
// is freed.
func (c *Comm) Free(b comm.Buffer) error {
	const op = "free"
	if err := c.collective(op); err != nil {
		return err
	}
	if err := c.joined(op); err != nil {
		return err
	}
	sb, err := c.lookup(op, b)
	if err != nil {
		return err
	}
	if err := c.enter(op, desync.Call{Op: desync.Free}, true); err != nil {
		return err
	}
	c.reqSeq++
	if err := c.agree(op, []uint64{reqFree, c.reqSeq, sb.id, uint64(sb.n)}); err != nil {
		return err
	}
	if err := c.lib.Free(sb.sym); err != nil {
		return c.fail(c.libErr(op, err))
	}
	sb.freed = true
	c.heapUsed -= sb.size
	return nil
}

// agree gathers every PE's request and compares each with PE 0's; every PE
// sees the same requests and so reaches the same verdict.
func (c *Comm) agree(op string, rec []uint64) error {
	if err := c.lib.AllGatherU64Enqueue(rec); err != nil {
		return c.fail(c.libErr(op, err))
	}
	if err := c.waitStream(op); err != nil {
		return err
	}
	all := make([]uint64, c.npes*len(rec))
	if err := c.lib.AllGatherU64Result(all, len(rec)); err != nil {
		return c.fail(c.libErr(op, err))
	}
	w := len(rec)
	ref := all[:w]
	var parts []string
	for pe := 1; pe < c.npes; pe++ {
		got := all[pe*w : (pe+1)*w]
		for i := range got {
			if got[i] != ref[i] {
				parts = append(parts, fmt.Sprintf("PE %d %s", pe, describe(got)))
				break
			}
		}
	}
	if len(parts) == 0 {
		return nil
	}
	parts = append([]string{"PE 0 " + describe(ref)}, parts...)
	return fmt.Errorf("nvshmem: PE %d: %s: %s: %w", c.me, op, strings.Join(parts, ", "), comm.ErrSizeMismatch)
}

// describe renders a gathered request.
func describe(r []uint64) string {
	switch r[0] {
	case reqAlloc:
		return fmt.Sprintf("allocates %s×%d (request %d)", comm.Kind(r[2]), r[3], r[1])
	case reqFree:
		return fmt.Sprintf("frees buffer %d of %d elements (request %d)", r[2], r[3], r[1])
	}
	return "is in another collective"
}

func (c *Comm) exhausted(op string, kind comm.Kind, n int, bytes int64) error {
	return fmt.Errorf("nvshmem: PE %d: %s: %s×%d (%d bytes): %d bytes free of the %d-byte heap (raise %s or NVSHMEM_SYMMETRIC_SIZE): %w",
		c.me, op, kind, n, bytes, c.heapSize-c.heapUsed, c.heapSize, comm.EnvHeapSize, comm.ErrHeapExhausted)
}
