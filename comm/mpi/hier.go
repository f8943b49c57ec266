//go:build mpi

package mpi

import (
	"fmt"
	"strconv"
	"unsafe"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/fold"

	"github.com/symddp/symddp/internal/settings"
)

// Hierarchical mode: the PEs of one host keep their buffers in one
// shared-memory window (MPI_Win_allocate_shared), so that AllReduce is done
// inside a host with plain loads and stores, as in the shm backend, and only
// between hosts over MPI:
//
//  1. barrier of the host's PEs;
//  2. local PE l of L sums its 1/L slice of every local copy, in local PE
//     order, into its own copy;
//  3. MPI_Allreduce of that slice among the PEs with local number l, one per
//     host;
//  4. PE l writes the reduced slice into every local copy; barrier.
//
// Every element is reduced once per host and then once across hosts, so
// every PE of every host ends with the same bits. On one host the sum is the
// left fold in PE order, the shm backend's bits (Comm.FixedOrder is true),
// and Reduce is done the same way, writing into the root's copy only. One-sided operations and
// the other collectives are unchanged (a second window, MPI_Win_create over
// the same memory, serves puts and gets).
//
// It is off by default; SYMDDP_MPI_HIERARCHICAL=1, on or true (or
// comm.Config.Options "hierarchical", which wins) switches it on, and 0, off
// or false leave it off; another value fails the open. Every host must have
// the same number of PEs. SYMDDP_MPI_HOST_SIZE=k makes hosts of k
// consecutive ranks instead of the real ones, so that one machine can stand
// for several hosts in tests.
const (
	EnvHierarchical = settings.MPIHier     // 1, on or true: hierarchical allreduce; 0, off or false: flat
	EnvHostSize     = settings.MPIHostSize // testing: hosts of k consecutive ranks
)

// reduceChunk is how many float32 a PE folds at a time (16 KiB), so that
// the partial result stays in L1 while every local copy streams through.
const reduceChunk = 4096

// hierarchy is this PE's place in hierarchical mode.
type hierarchy struct {
	on     bool
	cm     comms
	local  int // this PE's number on its host
	nlocal int // PEs per host
	hosts  int

	scratch []float32
	views   [][]float32
	ins     [][]float32
}

// hierConfig reads whether hierarchical mode is wanted and the simulated
// host size (0: the real hosts).
func hierConfig(cfg comm.Config) (on bool, hostSize int, err error) {
	v, ok := cfg.Options["hierarchical"]
	from := `comm.Config.Options["hierarchical"]`
	if !ok {
		v, from = settings.Get(EnvHierarchical), EnvHierarchical
	}
	switch v {
	case "", "0", "off", "false":
	case "1", "on", "true":
		on = true
	default:
		return false, 0, fmt.Errorf("%s=%q: want 1, on or true (hierarchical allreduce) or 0, off or false (flat, the default)", from, v)
	}
	if s := settings.Get(EnvHostSize); s != "" && on {
		if hostSize, err = strconv.Atoi(s); err != nil || hostSize < 1 {
			return false, 0, fmt.Errorf("%s=%q: want a positive number of ranks", EnvHostSize, s)
		}
	}
	return on, hostSize, nil
}

// openHierarchy sets hierarchical mode up when every PE asks for it (a PE
// that asks for something else fails the open on every PE). The caller
// holds mu.
func (c *Comm) openHierarchy(on bool, hostSize int) error {
	const op = "open"
	flag := uint64(0)
	if on {
		flag = 1
	}
	mine := []uint64{flag, uint64(hostSize)}
	all := make([]uint64, 2*c.npes)
	if err := c.call(op, waitAll, func() error { return cAllgatherU64(mine, all) }); err != nil {
		return err
	}
	for q := 1; q < c.npes; q++ {
		if all[2*q] != all[0] || all[2*q+1] != all[1] {
			return fmt.Errorf("%s: PE 0 has %s=%d %s=%d, PE %d has %d and %d: pass them to every rank (mpirun -x)",
				op, EnvHierarchical, all[0], EnvHostSize, all[1], q, all[2*q], all[2*q+1])
		}
	}
	if !on {
		return nil
	}
	color := -1
	if hostSize > 0 {
		color = c.me / hostSize
	}
	h := &c.hier
	var minL, maxL int
	err := c.call(op, waitAll, func() error {
		var err error
		h.cm, h.local, h.nlocal, minL, maxL, err = cHierSplit(color)
		return err
	})
	if err != nil {
		return err
	}
	if minL != maxL {
		return fmt.Errorf("%s: hierarchical allreduce needs the same number of PEs on every host, these have %d to %d (unset %s)", op, minL, maxL, EnvHierarchical)
	}
	h.on, h.hosts = true, c.npes/h.nlocal
	h.scratch = make([]float32, reduceChunk)
	h.views = make([][]float32, h.nlocal)
	h.ins = make([][]float32, h.nlocal)
	return nil
}

// closeHierarchy frees the communicators. The caller holds mu.
func (c *Comm) closeHierarchy(op string) error {
	if !c.hier.on {
		return nil
	}
	return c.call(op, waitAll, func() error { return cHierFree(&c.hier.cm) })
}

// hierReduce is AllReduce (root < 0) of [off, off+n) in hierarchical mode
// (see the top of the file), and Reduce to root on one host (ReduceScatter
// passes every PE itself); Mean is divided before the slices are spread, so
// every copy gets the same bits. The caller holds mu.
func (c *Comm) hierReduce(name string, b *buffer, off, n int, op comm.Op, root int) error {
	lo, hi := comm.Shard(off, n, c.hier.nlocal, c.hier.local)
	return c.hierReduceSlice(name, b, lo, hi, op, root)
}

// hierReduceSlice is hierReduce with this PE's local slice [lo, hi) given:
// the part of a reduce-scatter on one host passes its piece of the part
// (comm.PartShard), which every PE of the host must call it for, an empty
// one too.
func (c *Comm) hierReduceSlice(name string, b *buffer, lo, hi int, op comm.Op, root int) error {
	h := &c.hier
	for k, p := range b.peers {
		h.views[k] = unsafe.Slice((*float32)(p), b.n)
	}
	defer clear(h.views)
	mine := h.views[h.local]
	return c.call(name, waitAll, func() error {
		if err := cNodeBarrier(b.shared, h.cm); err != nil {
			return err
		}
		// With one host the reduced chunk goes straight into every copy
		// while it is in the cache; with several it goes into this PE's
		// copy, to be reduced across hosts first.
		spread := h.hosts == 1
		for start := lo; start < hi; start += reduceChunk {
			end := min(start+reduceChunk, hi)
			acc := h.scratch[:end-start]
			for k, v := range h.views {
				h.ins[k] = v[start:end]
			}
			fold.Fold(acc, h.ins, op) // in local PE order, as shm
			if !spread {
				copy(mine[start:end], acc)
				continue
			}
			if op == comm.Mean {
				fold.Divide(acc, float32(c.npes))
			}
			if root >= 0 { // on one host, local PE numbers are PE numbers
				copy(h.views[root][start:end], acc)
				continue
			}
			for k := range h.views { // a different first copy on every PE
				copy(h.views[(h.local+k)%h.nlocal][start:end], acc)
			}
		}
		clear(h.ins)
		if !spread && hi > lo {
			if err := cAllReduceCross(unsafe.Pointer(&mine[lo]), int64(hi-lo), mpiOp(op), h.cm); err != nil {
				return err
			}
			if op == comm.Mean {
				fold.Divide(mine[lo:hi], float32(c.npes))
			}
			for k, v := range h.views {
				if k != h.local {
					copy(v[lo:hi], mine[lo:hi])
				}
			}
		}
		return cNodeBarrier(b.shared, h.cm)
	})
}
