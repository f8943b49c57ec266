package nvshmem

import (
	"fmt"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/internal/cudalib"
)

// Algo is an allreduce algorithm, for benchmarks and tests.
type Algo = cudalib.Algo

// The allreduce algorithms.
const (
	AlgoAuto    = cudalib.Auto    // one-shot up to the one-shot limit, two-shot above
	AlgoOneShot = cudalib.OneShot // every PE reduces the whole range from every peer
	AlgoTwoShot = cudalib.TwoShot // reduce-scatter into owner slices, then all-gather
	AlgoNVSHMEM = cudalib.NVSHMEM // NVSHMEM's team reduction (aborts without MPS when PEs share a GPU)
)

// ParseAlgo reads "auto", "one-shot", "two-shot" or "nvshmem".
func ParseAlgo(s string) (Algo, error) {
	for _, a := range []Algo{AlgoAuto, AlgoOneShot, AlgoTwoShot, AlgoNVSHMEM} {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("nvshmem: algorithm %q: want auto, one-shot, two-shot or nvshmem", s)
}

// OneShotFits reports whether n elements of kind fit the one-shot kernel
// (every thread holds its vectors in registers between the two barriers).
func (c *Comm) OneShotFits(kind comm.Kind, n int) bool {
	const threads, perThread = 512, 2 // SD_THREADS, SD_ONE_SHOT_K
	vec := 16 / max(kind.Size(), 1)
	return (n+vec-1)/vec <= c.info.MaxBlocks*threads*perThread
}

// AllReduceWith is AllReduce with the algorithm chosen.
func (c *Comm) AllReduceWith(b comm.Buffer, off, n int, op comm.Op, algo Algo) error {
	return c.allReduce(b, off, n, op, algo)
}

// TimeAllReduce times iters allreduces of the first n elements of b (after
// warmup ones) with CUDA events on the stream, and returns the time per
// call. Collective: every PE calls it with the same arguments.
func (c *Comm) TimeAllReduce(b comm.Buffer, n int, op comm.Op, algo Algo, warmup, iters int) (time.Duration, error) {
	const name = "time_allreduce"
	sb, dt, cop, err := c.reduceArgs(name, b, 0, n, op, c.me)
	if err != nil {
		return 0, err
	}
	if err := c.collective(name); err != nil {
		return 0, err
	}
	if err := c.joined(name); err != nil {
		return 0, err
	}
	if err := c.enter(name, sb.call(desync.AllReduce, 0, n, op, 0), true); err != nil {
		return 0, err
	}
	d, err := c.lib.TimeAllReduce(sb.sym, n, dt, cop, algo, warmup, iters)
	if err != nil {
		return 0, c.fail(c.libErr(name, err))
	}
	return d / time.Duration(max(iters, 1)), nil
}

// TimeBarrier times iters barriers the same way; collective.
func (c *Comm) TimeBarrier(warmup, iters int) (time.Duration, error) {
	const name = "time_barrier"
	if err := c.collective(name); err != nil {
		return 0, err
	}
	if err := c.joined(name); err != nil {
		return 0, err
	}
	if err := c.enter(name, desync.Call{Op: desync.Barrier}, true); err != nil {
		return 0, err
	}
	d, err := c.lib.TimeBarrier(warmup, iters)
	if err != nil {
		return 0, c.fail(c.libErr(name, err))
	}
	return d / time.Duration(max(iters, 1)), nil
}

// TimeCopy times iters device-to-device copies of bytes on this PE's GPU
// (cudaMemcpyAsync, the card's copy bandwidth) and returns the time per
// copy. Not collective.
func (c *Comm) TimeCopy(bytes, warmup, iters int) (time.Duration, error) {
	if err := c.usable("time_copy"); err != nil {
		return 0, err
	}
	d, err := c.lib.TimeCopy(bytes, warmup, iters)
	if err != nil {
		return 0, c.libErr("time_copy", err)
	}
	return d / time.Duration(max(iters, 1)), nil
}
