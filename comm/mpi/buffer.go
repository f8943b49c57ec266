//go:build mpi

package mpi

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
)

// buffer is a symmetric allocation: one MPI window of n elements of kind on
// every PE (none for n == 0). It implements comm.HostBuffer; the host slices
// alias this PE's copy, the window's memory.
type buffer struct {
	c     *Comm
	id    uint64 // allocation number, the same on every PE
	kind  comm.Kind
	n     int
	w     window
	freed atomic.Bool // read without Comm.mu: host slices must not wait for MPI

	// Hierarchical mode: the shared-memory window of this host's PEs, and
	// the addresses of their copies (w is then MPI_Win_create over ours).
	shared window
	peers  []unsafe.Pointer
}

var _ comm.HostBuffer = (*buffer)(nil)

// Kind is the element kind.
func (b *buffer) Kind() comm.Kind { return b.kind }

// Len is the number of elements.
func (b *buffer) Len() int { return b.n }

// call is the fingerprint of collective coll over elements [off, off+n) of
// b, reducing with red, from or to root (where coll has one).
func (b *buffer) call(coll desync.Coll, off, n int, red comm.Op, root int) desync.Call {
	return desync.Call{Op: coll, Red: red, Root: root, Kind: b.kind, Buf: b.id, Off: off, N: n}
}

func (b *buffer) bytesLen() int64 { return int64(b.n) * int64(b.kind.Size()) }

func (b *buffer) live() bool { return !b.freed.Load() && !b.c.closed.Load() }

// Float32s is this PE's copy as float32, or nil (not Float32, freed, closed).
func (b *buffer) Float32s() []float32 {
	if b.kind != comm.Float32 || !b.live() {
		return nil
	}
	if b.n == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(b.w.base), b.n)
}

// Uint64s is this PE's copy as uint64, or nil (not Uint64, freed, closed).
func (b *buffer) Uint64s() []uint64 {
	if b.kind != comm.Uint64 || !b.live() {
		return nil
	}
	if b.n == 0 {
		return []uint64{}
	}
	return unsafe.Slice((*uint64)(b.w.base), b.n)
}

// Bytes is this PE's copy as raw bytes, or nil (freed, closed).
func (b *buffer) Bytes() []byte {
	if !b.live() {
		return nil
	}
	return b.local()
}

// local is this PE's copy as bytes, for the package's own use.
func (b *buffer) local() []byte {
	if b.n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(b.w.base), b.bytesLen())
}

// floats is elements [off, off+n) of this PE's copy of a Float32 buffer,
// for the package's own use.
func (b *buffer) floats(off, n int) []float32 {
	return unsafe.Slice((*float32)(b.at(off)), n)
}

// at is the address of element off of this PE's copy.
func (b *buffer) at(off int) unsafe.Pointer {
	if b.n == 0 {
		return nil
	}
	return unsafe.Add(b.w.base, off*b.kind.Size())
}

// lookup returns b as a live buffer of this Comm, or an error wrapping
// comm.ErrNotSymmetric. The caller holds mu.
func (c *Comm) lookup(op string, b comm.Buffer) (*buffer, error) {
	mb, ok := b.(*buffer)
	switch {
	case !ok || mb == nil:
		return nil, fmt.Errorf("mpi: PE %d: %s: a %T: %w", c.me, op, b, comm.ErrNotSymmetric)
	case mb.c != c:
		return nil, fmt.Errorf("mpi: PE %d: %s: buffer of another runtime: %w", c.me, op, comm.ErrNotSymmetric)
	case mb.freed.Load():
		return nil, fmt.Errorf("mpi: PE %d: %s: buffer already freed: %w", c.me, op, comm.ErrNotSymmetric)
	}
	return mb, nil
}

// access checks an access to elements [off, off+n) of b on PE pe: open
// Comm, live buffer of the wanted kind (0: any), range inside the buffer, PE
// in range. The caller holds mu.
func (c *Comm) access(op string, b comm.Buffer, kind comm.Kind, off, n, pe int) (*buffer, error) {
	if c.closed.Load() {
		return nil, c.closedErr(op)
	}
	mb, err := c.lookup(op, b)
	if err != nil {
		return nil, err
	}
	if kind != 0 && mb.kind != kind {
		return nil, fmt.Errorf("mpi: PE %d: %s: a %s buffer, want %s: %w", c.me, op, mb.kind, kind, comm.ErrKind)
	}
	if err := backend.CheckAccess(Name, c.me, op, mb, off, n, pe, c.npes); err != nil {
		return nil, err
	}
	return mb, nil
}
