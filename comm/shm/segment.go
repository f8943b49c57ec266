package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/desync"
)

// The heap file, mapped MAP_SHARED at a different address by every PE but
// with the same layout:
//
//	[0, pageSize)                  header: magic, job shape, barrier words
//	[pageSize, dataStart)          one slot per PE (pid, state, arrival epoch,
//	                               collective requests, signal futex)
//	[dataStart + pe*region, ...)   PE pe's copy of the symmetric heap
//
// A zero-filled file is a valid initial state, so the PEs need no
// coordinator: each one checks or sets the header with compare-and-swap.
const (
	magic     = 0x31706d6864647973 // "symddhp1", little endian
	pageSize  = 4096
	lineSize  = 64
	slotSize  = 512
	bufAlign  = 64 // every buffer starts on a cache line
	maxNPEs   = 4096
	headerEnd = pageSize
)

// header is the first page of the heap file. Words that PEs write often sit
// on cache lines of their own.
type header struct {
	magic    atomic.Uint64
	npes     atomic.Uint64
	heapSize atomic.Uint64
	desync   atomic.Uint64 // checkOn or checkOff: every PE must agree
	_        [lineSize - 32]byte

	// count is the number of barrier arrivals since the job started; the PE
	// whose arrival makes it e*NPEs completes barrier e.
	count atomic.Uint64
	_     [lineSize - 8]byte

	// gen is the number (mod 2^32) of the last completed barrier: the futex
	// word barrier waiters sleep on. waiters counts sleepers, so that the
	// last arriver makes a FUTEX_WAKE system call only when one is needed.
	gen     atomic.Uint32
	waiters atomic.Uint32
	_       [lineSize - 8]byte
}

// Values of header.desync.
const (
	checkOn uint64 = iota + 1
	checkOff
)

// Slot states.
const (
	stateAbsent uint64 = iota
	stateJoined
	stateClosed
)

// collReq is one PE's half of a collective request (Alloc or Free), compared
// with PE 0's to detect PEs that asked for different things. Two are kept per
// PE and used by the parity of the request's sequence number, so that a PE
// may write its next request while a slower peer still reads this one.
type collReq struct {
	seq    atomic.Uint64
	op     atomic.Uint64 // reqAlloc or reqFree
	a, b   atomic.Uint64 // alloc: kind, length; free: offset, length
	status atomic.Uint64 // alloc: 0 ok, else an errno from reserving memory
	_      [lineSize - 40]byte
}

// Collective request kinds.
const (
	reqAlloc uint64 = iota + 1
	reqFree
)

// slot is one PE's part of the control area.
type slot struct {
	pid   atomic.Uint64
	state atomic.Uint64
	_     [lineSize - 16]byte

	// arrive is the number of the last barrier this PE entered: a wait that
	// times out lists the PEs whose arrive is behind.
	arrive atomic.Uint64
	_      [lineSize - 8]byte

	req [2]collReq

	// sigSeq counts PutSignal updates to this PE's signal words (the futex
	// word WaitUntil sleeps on); sigWaiters counts its sleepers.
	sigSeq     atomic.Uint32
	sigWaiters atomic.Uint32
	_          [lineSize - 8]byte

	// call holds the fingerprints of this PE's collectives (desync.Call,
	// encoded), by the parity of their number, as req does.
	call [2]callSlot

	_ [slotSize - 7*lineSize]byte
}

// callSlot is one encoded desync.Call, on a cache line of its own.
type callSlot struct {
	w [desync.Words]atomic.Uint64
	_ [lineSize - 8*desync.Words]byte
}

// segment is one PE's mapping of the heap file.
type segment struct {
	path      string // "" for a private (memfd) heap
	file      *os.File
	mem       []byte
	npes      int
	region    int64 // bytes of one PE's heap, a multiple of pageSize
	dataStart int64
}

func init() {
	if unsafe.Sizeof(header{}) > headerEnd || unsafe.Sizeof(slot{}) != slotSize {
		panic("shm: control area layout does not fit its constants")
	}
}

// layout returns the offset of the data heaps and the file's total size.
func layout(npes int, region int64) (dataStart, total int64) {
	dataStart = roundUp(headerEnd+int64(npes)*slotSize, pageSize)
	return dataStart, dataStart + int64(npes)*region
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// openSegment opens (creating it if needed) and maps the heap file at path,
// or a private memfd heap when path is "". It checks or sets the header so
// that every PE of the job agrees on its shape and on whether collectives
// are checked for desync (check).
func openSegment(path string, npes int, region int64, check bool) (*segment, error) {
	var f *os.File
	if path == "" {
		fd, err := unix.MemfdCreate("symddp-heap", unix.MFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("create private heap: %w", err)
		}
		f = os.NewFile(uintptr(fd), "memfd:symddp-heap")
	} else {
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("heap file %q: want an absolute path", path)
		}
		var err error
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return nil, fmt.Errorf("open heap: %w", err)
		}
	}
	s := &segment{path: path, file: f, npes: npes, region: region}
	if err := s.mapAndCheck(check); err != nil {
		f.Close()
		if s.mem != nil {
			unix.Munmap(s.mem)
		}
		return nil, err
	}
	return s, nil
}

func (s *segment) mapAndCheck(check bool) error {
	name := s.file.Name()
	var total int64
	s.dataStart, total = layout(s.npes, s.region)
	// Reserve the control area's memory now (fallocate never shrinks a file
	// that a peer has already grown), so that touching it cannot SIGBUS.
	if err := unix.Fallocate(int(s.file.Fd()), 0, 0, s.dataStart); err != nil {
		return fmt.Errorf("heap %s: reserve %d bytes of control area: %w", name, s.dataStart, err)
	}
	mem, err := unix.Mmap(int(s.file.Fd()), 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if errors.Is(err, unix.ENOMEM) {
		// the one mapping holds every PE's heap: what an address-space
		// limit (ulimit -v) refuses grows with the PEs
		return fmt.Errorf("heap %s: map %d bytes (each PE maps all %d PEs' heaps of %d bytes): %w: lower the heap size (train --heap-size) or the PE count, or raise the address-space limit (ulimit -v)",
			name, total, s.npes, s.region, err)
	}
	if err != nil {
		return fmt.Errorf("heap %s: map %d bytes: %w", name, total, err)
	}
	s.mem = mem
	h := s.header()
	if !h.magic.CompareAndSwap(0, magic) && h.magic.Load() != magic {
		return fmt.Errorf("heap %s: not a symddp heap (bad magic %#x)", name, h.magic.Load())
	}
	if !h.npes.CompareAndSwap(0, uint64(s.npes)) && h.npes.Load() != uint64(s.npes) {
		return fmt.Errorf("heap %s: set up for %d PEs, this PE was started for %d", name, h.npes.Load(), s.npes)
	}
	if !h.heapSize.CompareAndSwap(0, uint64(s.region)) && h.heapSize.Load() != uint64(s.region) {
		return fmt.Errorf("heap %s: set up with %d-byte heaps, this PE asks for %d", name, h.heapSize.Load(), s.region)
	}
	want, mine, theirs := checkOn, "on", "off"
	if !check {
		want, mine, theirs = checkOff, "off", "on"
	}
	if !h.desync.CompareAndSwap(0, want) && h.desync.Load() != want {
		return fmt.Errorf("heap %s: another PE of the job has the desync check %s, this one %s (set %s alike for every PE)",
			name, theirs, mine, comm.EnvDesyncCheck)
	}
	// Every PE that gets here agrees on the total size, so growing the file
	// to it is idempotent. The data pages are reserved later, per allocation.
	fi, err := s.file.Stat()
	if err != nil {
		return fmt.Errorf("heap %s: %w", name, err)
	}
	if fi.Size() < total {
		if err := s.file.Truncate(total); err != nil {
			return fmt.Errorf("heap %s: grow to %d bytes: %w", name, total, err)
		}
	}
	return nil
}

func (s *segment) header() *header {
	return (*header)(unsafe.Pointer(&s.mem[0]))
}

func (s *segment) slot(pe int) *slot {
	return (*slot)(unsafe.Pointer(&s.mem[headerEnd+pe*slotSize]))
}

// addr is the address of byte off of PE pe's heap. The caller has checked
// that off lies inside the heap.
func (s *segment) addr(pe int, off int64) unsafe.Pointer {
	return unsafe.Pointer(&s.mem[s.dataStart+int64(pe)*s.region+off])
}

// reserve allocates memory for bytes [off, off+n) of PE pe's heap, so that a
// full /dev/shm is an error here rather than a SIGBUS on first touch.
func (s *segment) reserve(pe int, off, n int64) error {
	if n == 0 {
		return nil
	}
	return unix.Fallocate(int(s.file.Fd()), 0, s.dataStart+int64(pe)*s.region+off, n)
}

// close unmaps the heap and closes the file; the file itself stays (the
// launcher removes it).
func (s *segment) close() error {
	err := unix.Munmap(s.mem)
	s.mem = nil
	return errors.Join(err, s.file.Close())
}
