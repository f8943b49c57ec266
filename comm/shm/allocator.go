package shm

// allocator is a first-fit allocator over one PE's heap, [0, size) bytes. It
// is deterministic: the same sequence of alloc and release calls gives the
// same offsets on every PE, which is what makes buffers symmetric.
type allocator struct {
	size int64
	free []span // sorted by offset, never adjacent (coalesced)
}

type span struct{ off, n int64 }

func newAllocator(size int64) allocator {
	return allocator{size: size, free: []span{{0, size}}}
}

// alloc reserves n bytes (n > 0, a multiple of bufAlign) and returns their
// offset; ok is false when no free span is large enough.
func (a *allocator) alloc(n int64) (off int64, ok bool) {
	for i, s := range a.free {
		if s.n < n {
			continue
		}
		if s.n == n {
			a.free = append(a.free[:i], a.free[i+1:]...)
		} else {
			a.free[i] = span{s.off + n, s.n - n}
		}
		return s.off, true
	}
	return 0, false
}

// release returns [off, off+n) to the free list, merging it with its
// neighbours.
func (a *allocator) release(off, n int64) {
	i := 0
	for i < len(a.free) && a.free[i].off < off {
		i++
	}
	a.free = append(a.free, span{})
	copy(a.free[i+1:], a.free[i:])
	a.free[i] = span{off, n}
	if i+1 < len(a.free) && a.free[i].off+a.free[i].n == a.free[i+1].off {
		a.free[i].n += a.free[i+1].n
		a.free = append(a.free[:i+1], a.free[i+2:]...)
	}
	if i > 0 && a.free[i-1].off+a.free[i-1].n == a.free[i].off {
		a.free[i-1].n += a.free[i].n
		a.free = append(a.free[:i], a.free[i+1:]...)
	}
}

// freeBytes is the total size of the free spans.
func (a *allocator) freeBytes() int64 {
	var t int64
	for _, s := range a.free {
		t += s.n
	}
	return t
}

// largest is the size of the largest free span.
func (a *allocator) largest() int64 {
	var m int64
	for _, s := range a.free {
		m = max(m, s.n)
	}
	return m
}
