//go:build mpi

package mpi

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
)

// Request codes of the agreement that starts Alloc and Free.
const (
	reqAlloc = 1
	reqFree  = 2
)

// Alloc collectively allocates n zeroed elements of kind on every PE: one
// MPI window.
//
// The PEs first exchange their requests (MPI_Allgather), so PEs that asked
// for different kinds or lengths all fail with comm.ErrSizeMismatch, and a
// request that does not fit in some PE's heap fails everywhere with
// comm.ErrHeapExhausted; nothing is allocated then. Otherwise every PE
// makes the window (MPI_Win_allocate), zeroes its copy and meets the others
// in a barrier, so that no peer writes into a copy before it is zeroed.
func (c *Comm) Alloc(kind comm.Kind, n int) (comm.Buffer, error) {
	const op = "alloc"
	if err := c.beginCollective(op); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	if err := backend.CheckAlloc(Name, c.me, kind, n); err != nil {
		return nil, err
	}
	bytes := int64(math.MaxInt64)
	if int64(n) <= math.MaxInt64/int64(kind.Size()) {
		bytes = int64(n) * int64(kind.Size())
	}
	fits := uint64(0)
	if bytes <= c.heapSize-c.heapUsed {
		fits = 1
	}
	all, err := c.agree(op, desync.Alloc, []uint64{reqAlloc, uint64(kind), uint64(n), fits}, 3)
	if err != nil {
		return nil, err
	}
	var short []string
	for q := 0; q < c.npes; q++ {
		if all[4*q+3] == 0 {
			short = append(short, fmt.Sprint(q))
		}
	}
	if len(short) > 0 {
		return nil, fmt.Errorf("mpi: PE %d: %s: %s×%d (%d bytes) does not fit in the heap of PEs [%s] (this PE: %d of %d bytes free; raise %s): %w",
			c.me, op, kind, n, bytes, strings.Join(short, " "), c.heapSize-c.heapUsed, c.heapSize, comm.EnvHeapSize, comm.ErrHeapExhausted)
	}
	c.nextID++
	b := &buffer{c: c, id: c.nextID, kind: kind, n: n}
	if n > 0 {
		err := c.call(op, waitAll, func() error {
			var err error
			if c.hier.on {
				b.shared, b.w, b.peers, err = cWinAllocateHier(bytes, c.hier.cm, c.hier.local, c.hier.nlocal)
			} else if b.w, err = cWinAllocate(bytes); err != nil {
				err = explainWindowError(err)
			}
			if err != nil {
				return err
			}
			return cBarrier()
		})
		if err != nil {
			return nil, err
		}
	}
	c.heapUsed += bytes
	c.live[b.id] = b
	return b, nil
}

// Free collectively releases b on every PE. A buffer that is not a live
// allocation of this Comm gives comm.ErrNotSymmetric (without a collective);
// PEs that free different buffers all get comm.ErrSizeMismatch and nothing is
// freed.
func (c *Comm) Free(b comm.Buffer) error {
	const op = "free"
	if err := c.beginCollective(op); err != nil {
		return err
	}
	defer c.mu.Unlock()
	mb, err := c.lookup(op, b)
	if err != nil {
		return err
	}
	if _, err := c.agree(op, desync.Free, []uint64{reqFree, mb.id, uint64(mb.kind), uint64(mb.n)}, 4); err != nil {
		return err
	}
	return c.freeWindow(op, mb)
}

// freeWindow releases mb's window (collective) and its heap space. The
// caller holds mu.
func (c *Comm) freeWindow(op string, mb *buffer) error {
	mb.freed.Store(true)
	delete(c.live, mb.id)
	delete(c.dirty, mb)
	c.heapUsed -= mb.bytesLen()
	if mb.n == 0 {
		return nil
	}
	return c.call(op, waitAll, func() error {
		if err := cWinFree(&mb.w); err != nil || mb.peers == nil {
			return err
		}
		return cWinFree(&mb.shared)
	})
}

// liveInOrder lists the live buffers in allocation order, which is the same
// on every PE. The caller holds mu.
func (c *Comm) liveInOrder() []*buffer {
	out := make([]*buffer, 0, len(c.live))
	for _, b := range c.live {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *buffer) int { return int(a.id - b.id) })
	return out
}

// agree enters collective coll, gathers every PE's request (four words: a
// req code, then its arguments), and fails with comm.ErrSizeMismatch on every PE unless every
// request equals PE 0's in its first cmp words. It returns all the requests,
// PE by PE. The caller holds mu.
func (c *Comm) agree(op string, coll desync.Coll, mine []uint64, cmp int) ([]uint64, error) {
	if err := c.enter(op, desync.Call{Op: coll}); err != nil {
		return nil, err
	}
	k := len(mine)
	all := make([]uint64, k*c.npes)
	if err := c.call(op, waitAll, func() error { return cAllgatherU64(mine, all) }); err != nil {
		return nil, err
	}
	var odd []int
	for q := 1; q < c.npes; q++ {
		if !slices.Equal(all[q*k:q*k+cmp], all[:cmp]) {
			odd = append(odd, q)
		}
	}
	if len(odd) == 0 {
		return all, nil
	}
	parts := []string{"PE 0 " + describe(all[:k])}
	for _, q := range odd {
		parts = append(parts, fmt.Sprintf("PE %d %s", q, describe(all[q*k:(q+1)*k])))
	}
	return nil, fmt.Errorf("mpi: PE %d: %s: %s: %w", c.me, op, strings.Join(parts, ", "), comm.ErrSizeMismatch)
}

func describe(r []uint64) string {
	switch r[0] {
	case reqAlloc:
		return fmt.Sprintf("allocates %s×%d", comm.Kind(r[1]), r[2])
	case reqFree:
		return fmt.Sprintf("frees allocation #%d (%s×%d)", r[1], comm.Kind(r[2]), r[3])
	}
	return "is in another collective"
}
