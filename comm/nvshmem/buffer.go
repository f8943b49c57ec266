package nvshmem

import (
	"fmt"
	"slices"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/internal/cudalib"
)

// buffer is a symmetric allocation: n elements of kind in every PE's
// NVSHMEM heap, at the same address on every PE. It implements
// comm.DeviceBuffer.
type buffer struct {
	c     *Comm
	kind  comm.Kind
	n     int
	sym   *cudalib.SymBuf
	size  int64  // heap bytes accounted to it
	id    uint64 // allocation number, the same on every PE
	freed bool
}

var _ comm.DeviceBuffer = (*buffer)(nil)

// Kind is the element kind.
func (b *buffer) Kind() comm.Kind { return b.kind }

// Len is the number of elements.
func (b *buffer) Len() int { return b.n }

// DevicePtr is the device address of this PE's copy; 0 once the buffer is
// freed or its Comm closed.
func (b *buffer) DevicePtr() uintptr {
	if b.freed || b.c.closed {
		return 0
	}
	return b.sym.Ptr()
}

// call is the fingerprint of collective coll over elements [off, off+n) of
// b (desync.Call, numbered by Comm.enter); red and root where coll has them.
func (b *buffer) call(coll desync.Coll, off, n int, red comm.Op, root int) desync.Call {
	return desync.Call{Op: coll, Red: red, Root: root, Kind: b.kind, Buf: b.id, Off: off, N: n}
}

// lookup returns b as a live buffer of this Comm, or an error wrapping
// comm.ErrNotSymmetric.
func (c *Comm) lookup(op string, b comm.Buffer) (*buffer, error) {
	sb, ok := b.(*buffer)
	switch {
	case !ok || sb == nil:
		return nil, fmt.Errorf("nvshmem: PE %d: %s: a %T: %w", c.me, op, b, comm.ErrNotSymmetric)
	case sb.c != c:
		return nil, fmt.Errorf("nvshmem: PE %d: %s: buffer of another runtime: %w", c.me, op, comm.ErrNotSymmetric)
	case sb.freed:
		return nil, fmt.Errorf("nvshmem: PE %d: %s: buffer already freed: %w", c.me, op, comm.ErrNotSymmetric)
	}
	return sb, nil
}

// access checks an access to elements [off, off+n) of b on PE pe: open
// Comm, live buffer of one of the wanted kinds (none: any), range inside
// the buffer, PE in range.
func (c *Comm) access(op string, b comm.Buffer, off, n, pe int, kinds ...comm.Kind) (*buffer, error) {
	if err := c.usable(op); err != nil {
		return nil, err
	}
	sb, err := c.lookup(op, b)
	if err != nil {
		return nil, err
	}
	if len(kinds) > 0 {
		ok := false
		for _, k := range kinds {
			ok = ok || sb.kind == k
		}
		if !ok {
			// A copy goes into the message: kinds itself escaping would put
			// every caller's variadic slice on the heap.
			return nil, fmt.Errorf("nvshmem: PE %d: %s: a %s buffer, want %v: %w", c.me, op, sb.kind, slices.Clone(kinds), comm.ErrKind)
		}
	}
	if err := backend.CheckAccess(Name, c.me, op, sb, off, n, pe, c.npes); err != nil {
		return nil, err
	}
	return sb, nil
}
