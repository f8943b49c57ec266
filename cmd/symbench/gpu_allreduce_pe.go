package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/nvshmem"
)

// gpuAllReducePE is one PE of `symbench gpu-allreduce`: for every size and
// algorithm it sizes a measurement from a short probe (PE 0's probe, which
// it broadcasts, so every PE runs the same number of calls), times it with
// CUDA events and, on PE 0, prints "gpuresult <what> <bytes> <iters>
// <seconds per call>".
func gpuAllReducePE(cfg comm.Config, o gpuOpts) (err error) {
	if o.lib != "" {
		cfg.Options = map[string]string{"lib": o.lib}
	}
	cc, err := comm.Open(nvshmem.Name, cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cc.Close()) }()
	c := cc.(*nvshmem.Comm)
	in := c.Info()
	if c.MyPE() == 0 {
		fmt.Printf("gpuinfo %s, %d SMs, %d GPU(s) for %d PE(s), NVSHMEM %d.%d.%d, CUDA runtime %d, driver %d, %d blocks per collective\n",
			in.DeviceName, in.SMCount, in.DeviceCount, c.NPEs(), in.NVSHMEMVersion[0], in.NVSHMEMVersion[1], in.NVSHMEMVersion[2],
			in.CUDARuntime, in.CUDADriver, in.MaxBlocks)
	}
	kind := o.kind()
	b, err := c.Alloc(kind, int(o.maxBytes)/kind.Size())
	if err != nil {
		return err
	}
	iterBuf, err := c.Alloc(comm.Float32, 1)
	if err != nil {
		return err
	}
	m := measurer{c: c, iterBuf: iterBuf, target: o.target}
	report := func(what string, bytes int64, iters int, per time.Duration) {
		if c.MyPE() == 0 {
			fmt.Printf("gpuresult %s %d %d %.9g\n", what, bytes, iters, per.Seconds())
		}
	}
	iters, per, err := m.measure(func(it int) (time.Duration, error) { return c.TimeBarrier(2, it) })
	if err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	report("barrier", 0, iters, per)
	for _, size := range o.sizes() {
		n := int(size) / kind.Size()
		for _, name := range o.algos {
			algo, _ := nvshmem.ParseAlgo(name)
			if algo == nvshmem.AlgoOneShot && !c.OneShotFits(kind, n) {
				continue
			}
			iters, per, err := m.measure(func(it int) (time.Duration, error) {
				return c.TimeAllReduce(b, n, comm.Sum, algo, 2, it)
			})
			if err != nil {
				return fmt.Errorf("%s allreduce of %d bytes: %w", name, size, err)
			}
			report(name, size, iters, per)
		}
		if o.nvshmem && size <= o.nvshmemMax {
			iters, per, err := m.measure(func(it int) (time.Duration, error) {
				return c.TimeAllReduce(b, n, comm.Sum, nvshmem.AlgoNVSHMEM, 1, it)
			})
			if err != nil {
				return fmt.Errorf("NVSHMEM allreduce of %d bytes: %w", size, err)
			}
			report("nvshmem", size, iters, per)
		}
		if c.NPEs() == 1 {
			iters, per, err := m.measure(func(it int) (time.Duration, error) { return c.TimeCopy(int(size), 2, it) })
			if err != nil {
				return fmt.Errorf("copy of %d bytes: %w", size, err)
			}
			report("copy", size, iters, per)
		}
	}
	if err := c.Free(iterBuf); err != nil {
		return err
	}
	return c.Free(b)
}

// measurer sizes and runs timings that every PE runs together.
type measurer struct {
	c       *nvshmem.Comm
	iterBuf comm.Buffer
	target  time.Duration
}

// measure probes run with 3 calls, takes PE 0's time per call to choose the
// number of calls that lasts the target (3 to 10000, the same on every PE),
// and runs that.
func (m measurer) measure(run func(iters int) (time.Duration, error)) (int, time.Duration, error) {
	probe, err := run(3)
	if err != nil {
		return 0, 0, err
	}
	iters := 3
	if probe > 0 {
		iters = int(m.target / probe)
	}
	iters = min(max(iters, 3), 10000)
	// PE 0 decides: its choice reaches every PE through a broadcast.
	if err := m.c.P(m.iterBuf, 0, float32(iters), m.c.MyPE()); err != nil {
		return 0, 0, err
	}
	if err := m.c.Broadcast(m.iterBuf, 0, 1, 0); err != nil {
		return 0, 0, err
	}
	v, err := m.c.G(m.iterBuf, 0, m.c.MyPE())
	if err != nil {
		return 0, 0, err
	}
	iters = int(v)
	per, err := run(iters)
	return iters, per, err
}
