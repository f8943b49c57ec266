package cudatest

import (
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/hostloops"
)

// SwiGLU is sdc_swiglu: the CPU engine's loop (hostloops.SwiGLU), whose
// float32 operations the kernel does; in bf16 the same loop on the widened
// a and b, y rounded to bf16.
func (d *Device) SwiGLU(dt cudalib.DType, y, a, b uintptr, n int) error {
	if err := checkDType("sdc_swiglu", dt); err != nil {
		return err
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.swiGLU(dt, y, a, b, n) })
		return nil
	}
	d.swiGLU(dt, y, a, b, n)
	return nil
}

func (d *Device) swiGLU(dt cudalib.DType, y, a, b uintptr, n int) {
	if dt == cudalib.Float32 {
		hostloops.SwiGLU(d.f32(y, n), d.f32(a, n), d.f32(b, n))
		return
	}
	out := make([]float32, n)
	hostloops.SwiGLU(out, d.widen(a, n), d.widen(b, n))
	narrow(d.bf16At(y, n), out)
}

// SwiGLUBackward is sdc_swiglu_backward: hostloops.SwiGLUBackward, in bf16
// on the widened dy, a and b (all read before da, which may be dy, is
// written), da and db rounded to bf16.
func (d *Device) SwiGLUBackward(dt cudalib.DType, da, db, dy, a, b uintptr, n int) error {
	if err := checkDType("sdc_swiglu_backward", dt); err != nil {
		return err
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.swiGLUBackward(dt, da, db, dy, a, b, n) })
		return nil
	}
	d.swiGLUBackward(dt, da, db, dy, a, b, n)
	return nil
}

func (d *Device) swiGLUBackward(dt cudalib.DType, da, db, dy, a, b uintptr, n int) {
	if dt == cudalib.Float32 {
		hostloops.SwiGLUBackward(d.f32(da, n), d.f32(db, n), d.f32(dy, n), d.f32(a, n), d.f32(b, n))
		return
	}
	outA, outB := make([]float32, n), make([]float32, n)
	hostloops.SwiGLUBackward(outA, outB, d.widen(dy, n), d.widen(a, n), d.widen(b, n))
	narrow(d.bf16At(da, n), outA)
	narrow(d.bf16At(db, n), outB)
}
