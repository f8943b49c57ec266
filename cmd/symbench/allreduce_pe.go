package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/symddp/symddp/comm"
)

// maxIters bounds the calls of one repetition (as MAX_ITERS in
// bench/mpi_allreduce.c).
const maxIters = 100000

// allReducePE is one PE of the shm measurement. It times the allreduce of
// every size exactly as bench/mpi_allreduce.c times MPI_Allreduce, and PE 0
// prints "result <bytes> <iters> <seconds per call>" for each.
func allReducePE(cfg comm.Config, backend string, opts allReduceOpts) (err error) {
	c, err := comm.Open(backend, cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	n := int(opts.maxBytes / 4)
	buf, err := c.Alloc(comm.Float32, n)
	if err != nil {
		return err
	}
	tbuf, err := c.Alloc(comm.Float32, 1)
	if err != nil {
		return err
	}
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	if err := c.PutFloat32(buf, 0, ones, c.MyPE()); err != nil {
		return err
	}
	t := timer{c: c, buf: buf, tbuf: tbuf}
	for _, size := range opts.sizes() {
		iters, secs, err := t.measure(int(size/4), opts.reps, opts.target.Seconds())
		if err != nil {
			return fmt.Errorf("%d bytes: %w", size, err)
		}
		if c.MyPE() == 0 {
			fmt.Printf("result %d %d %.9g\n", size, iters, secs)
		}
	}
	return nil
}

// timer times AllReduce on buf; tbuf is a one-element scratch buffer.
type timer struct {
	c         comm.Comm
	buf, tbuf comm.Buffer
}

// measure times allreduces of n floats: two warm-up calls; then 1, 2, 4, ...
// calls until they take a quarter of target seconds, which sizes a
// repetition; then reps repetitions. It returns the calls per repetition and
// the median time per call.
func (t timer) measure(n, reps int, target float64) (iters int, median float64, err error) {
	if _, err := t.timeCalls(n, 2); err != nil {
		return 0, 0, err
	}
	iters = 1
	var per float64
	for {
		if per, err = t.timeCalls(n, iters); err != nil {
			return 0, 0, err
		}
		if per*float64(iters) >= target/4 || iters >= maxIters {
			break
		}
		iters *= 2
	}
	iters = min(int(target/per)+1, maxIters)
	times := make([]float64, reps)
	for r := range times {
		if times[r], err = t.timeCalls(n, iters); err != nil {
			return 0, 0, err
		}
	}
	slices.Sort(times)
	return iters, times[reps/2], nil
}

// timeCalls returns the time per call of iters allreduces of n floats after
// a barrier: the maximum over the PEs, so that every PE gets the same value
// and takes the same decisions.
func (t timer) timeCalls(n, iters int) (float64, error) {
	if err := t.c.Barrier(); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := 0; i < iters; i++ {
		if err := t.c.AllReduce(t.buf, 0, n, comm.Sum); err != nil {
			return 0, err
		}
	}
	per := time.Since(start).Seconds() / float64(iters)
	if err := t.c.P(t.tbuf, 0, float32(per), t.c.MyPE()); err != nil {
		return 0, err
	}
	if err := t.c.AllReduce(t.tbuf, 0, 1, comm.Max); err != nil {
		return 0, err
	}
	v, err := t.c.G(t.tbuf, 0, t.c.MyPE())
	return float64(v), err
}
