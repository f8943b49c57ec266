package ddp

import (
	"fmt"
	"github.com/symddp/symddp/ddp/devicestep"

	"github.com/symddp/symddp/comm"
)

// Gradients reduced in bf16 (Options.GradDType = comm.BFloat16) on the
// device step path: after backward the engine rounds the fp32 gradient
// arena into a symmetric bf16 buffer, the backend reduces that (in fp32,
// widened, PE by PE, rounded to bf16 once: comm/nvshmem's kernels), and
// the engine widens the result back into the arena (the whole of it, or
// this PE's shard with the sharded update) before the update, which then
// runs in fp32 as always. Half the bytes cross the links; the gradients
// lose the low 16 bits of their mantissa. With one PE nothing is reduced
// and nothing is rounded.

// bf16Grads is the bf16 gradient buffer of a run that reduces in bf16.
type bf16Grads struct {
	buf comm.Buffer // symmetric, n bf16 values
	ptr uintptr     // this PE's copy
	c   devicestep.BF16Caster
}

// gradDTypeSetup checks Options.GradDType against the strategy chosen and
// allocates the bf16 buffer where it applies (collective, like every
// allocation in New).
func (t *Trainer) gradDTypeSetup(device bool) error {
	switch t.opts.GradDType {
	case 0, comm.Float32:
		return nil
	case comm.BFloat16:
	default:
		return fmt.Errorf("gradient reduction in %v: only float32 and bfloat16", t.opts.GradDType)
	}
	if !device {
		return fmt.Errorf("gradients reduced in bf16 need the GPU step path (the nvshmem backend on the CUDA engine, no gradient accumulation); this run reduces them on the %s path: use fp32", t.strat.name())
	}
	if t.c.NPEs() == 1 {
		return nil
	}
	c, ok := t.e.(devicestep.BF16Caster)
	if !ok {
		return fmt.Errorf("the %s engine cannot round gradients to bf16", t.e.Name())
	}
	b, err := t.c.Alloc(comm.BFloat16, t.n)
	if err != nil {
		return fmt.Errorf("allocate the bf16 gradient buffer (%d values): %w", t.n, err)
	}
	db, ok := b.(comm.DeviceBuffer)
	if !ok {
		return fmt.Errorf("the %s backend's bf16 buffer is not in device memory", t.c.Backend())
	}
	t.bf16 = &bf16Grads{buf: b, ptr: db.DevicePtr(), c: c}
	return nil
}

// reduceGrads enqueues the reduction of the gradient arena and the control
// words after backward: an allreduce of the whole arena, or, with the
// sharded update d, a reduce-scatter that leaves this PE's shard reduced;
// in fp32, or through the bf16 buffer. (With a bucket size the reduction
// runs bucket by bucket during backward instead: overlap.go.)
func (t *Trainer) reduceGrads(ar enqueueAllReducer, d *deviceShard) error {
	bf := t.bf16
	if bf == nil && d == nil {
		// one allreduce for the arena and the control words after it
		if err := ar.AllReduceEnqueue(t.grads, 0, t.n+ctrlWords, comm.Sum); err != nil {
			return fmt.Errorf("gradient allreduce: %w", err)
		}
		return nil
	}
	buf := t.grads
	if bf != nil {
		bf.c.CastToBF16(bf.ptr, t.gView)
		buf = bf.buf
	}
	if d != nil {
		if err := d.s.ReduceScatterEnqueue(buf, 0, t.n, comm.Sum); err != nil {
			return fmt.Errorf("gradient reduce-scatter: %w", err)
		}
	} else if err := ar.AllReduceEnqueue(buf, 0, t.n, comm.Sum); err != nil {
		return fmt.Errorf("gradient allreduce: %w", err)
	}
	t.widenBF16()
	if err := ar.AllReduceEnqueue(t.grads, t.n, ctrlWords, comm.Sum); err != nil {
		return fmt.Errorf("control words allreduce: %w", err)
	}
	return nil
}

// widenBF16 enqueues the widening of the bf16 reduction's result back into
// the gradient arena: this PE's shard under the sharded update, else the
// whole arena (nothing when gradients reduce in fp32).
func (t *Trainer) widenBF16() {
	bf, d := t.bf16, t.dshard
	switch {
	case bf != nil && d != nil:
		bf.c.CastFromBF16(d.g, bf.ptr+2*uintptr(d.lo))
	case bf != nil:
		bf.c.CastFromBF16(t.gView, bf.ptr)
	}
}
