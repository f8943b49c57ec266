package shm

import (
	"fmt"
	"unsafe"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/backend"
	"github.com/symddp/symddp/comm/internal/desync"
)

// buffer is a symmetric allocation: n elements of kind at byte offset off of
// every PE's heap. It implements comm.HostBuffer.
type buffer struct {
	c     *Comm
	kind  comm.Kind
	n     int
	off   int64  // byte offset in every PE's heap
	size  int64  // bytes reserved: n*kind.Size() rounded up to bufAlign
	id    uint64 // the how-manieth Alloc of the Comm made it, the same on every PE
	freed bool
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

func (b *buffer) live() bool { return !b.freed && !b.c.closed }

// Float32s is this PE's copy as float32, or nil (not Float32, freed, closed).
func (b *buffer) Float32s() []float32 {
	if b.kind != comm.Float32 || !b.live() {
		return nil
	}
	return b.c.f32(b, b.c.me)
}

// Uint64s is this PE's copy as uint64, or nil (not Uint64, freed, closed).
func (b *buffer) Uint64s() []uint64 {
	if b.kind != comm.Uint64 || !b.live() {
		return nil
	}
	if b.n == 0 {
		return []uint64{}
	}
	return unsafe.Slice((*uint64)(b.c.seg.addr(b.c.me, b.off)), b.n)
}

// Bytes is this PE's copy as raw bytes, or nil (freed, closed).
func (b *buffer) Bytes() []byte {
	if !b.live() {
		return nil
	}
	return b.c.bytes(b, b.c.me)
}

// f32 is PE pe's copy of the Float32 buffer b.
func (c *Comm) f32(b *buffer, pe int) []float32 {
	if b.n == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(c.seg.addr(pe, b.off)), b.n)
}

// bytes is PE pe's copy of b as bytes.
func (c *Comm) bytes(b *buffer, pe int) []byte {
	if b.n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(c.seg.addr(pe, b.off)), b.n*b.kind.Size())
}

// lookup returns b as a live buffer of this Comm, or an error wrapping
// comm.ErrNotSymmetric.
func (c *Comm) lookup(op string, b comm.Buffer) (*buffer, error) {
	sb, ok := b.(*buffer)
	switch {
	case !ok || sb == nil:
		return nil, fmt.Errorf("shm: PE %d: %s: a %T: %w", c.me, op, b, comm.ErrNotSymmetric)
	case sb.c != c:
		return nil, fmt.Errorf("shm: PE %d: %s: buffer of another runtime: %w", c.me, op, comm.ErrNotSymmetric)
	case sb.freed:
		return nil, fmt.Errorf("shm: PE %d: %s: buffer already freed: %w", c.me, op, comm.ErrNotSymmetric)
	}
	return sb, nil
}

// access checks a one-sided or collective access to elements [off, off+n)
// of b on PE pe: open Comm, live buffer of the wanted kind (0: any), range
// inside the buffer, PE in range.
func (c *Comm) access(op string, b comm.Buffer, kind comm.Kind, off, n, pe int) (*buffer, error) {
	if err := c.usable(op); err != nil {
		return nil, err
	}
	sb, err := c.lookup(op, b)
	if err != nil {
		return nil, err
	}
	if kind != 0 && sb.kind != kind {
		return nil, fmt.Errorf("shm: PE %d: %s: a %s buffer, want %s: %w", c.me, op, sb.kind, kind, comm.ErrKind)
	}
	if err := backend.CheckAccess(Name, c.me, op, sb, off, n, pe, c.npes); err != nil {
		return nil, err
	}
	return sb, nil
}
