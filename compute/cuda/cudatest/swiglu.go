package cudatest

import (
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/hostloops"
)

// SwiGLU is sdc_swiglu: the CPU engine's loop (hostloops.SwiGLU), whose
// float32 operations the kernel does, over y (rows, f) and the packed ab
// (rows, 2f); in bf16 the same loop on the widened ab, y rounded to bf16.
func (d *Device) SwiGLU(dt cudalib.DType, y, ab uintptr, rows, f int) error {
	if err := checkDType("sdc_swiglu", dt); err != nil {
		return err
	}
	if rows == 0 || f == 0 {
		return nil
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.swiGLU(dt, y, ab, rows, f) })
		return nil
	}
	d.swiGLU(dt, y, ab, rows, f)
	return nil
}

func (d *Device) swiGLU(dt cudalib.DType, y, ab uintptr, rows, f int) {
	n := rows * f
	if dt == cudalib.Float32 {
		hostloops.SwiGLU(d.f32(y, n), d.f32(ab, 2*n), rows, f)
		return
	}
	out := make([]float32, n)
	hostloops.SwiGLU(out, d.widen(ab, 2*n), rows, f)
	narrow(d.bf16At(y, n), out)
}

// SwiGLUBackward is sdc_swiglu_backward: hostloops.SwiGLUBackward, in bf16
// on the widened dy and ab, dab rounded to bf16.
func (d *Device) SwiGLUBackward(dt cudalib.DType, dab, dy, ab uintptr, rows, f int) error {
	if err := checkDType("sdc_swiglu_backward", dt); err != nil {
		return err
	}
	if rows == 0 || f == 0 {
		return nil
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.swiGLUBackward(dt, dab, dy, ab, rows, f) })
		return nil
	}
	d.swiGLUBackward(dt, dab, dy, ab, rows, f)
	return nil
}

func (d *Device) swiGLUBackward(dt cudalib.DType, dab, dy, ab uintptr, rows, f int) {
	n := rows * f
	if dt == cudalib.Float32 {
		hostloops.SwiGLUBackward(d.f32(dab, 2*n), d.f32(dy, n), d.f32(ab, 2*n), rows, f)
		return
	}
	out := make([]float32, 2*n)
	hostloops.SwiGLUBackward(out, d.widen(dy, n), d.widen(ab, 2*n), rows, f)
	narrow(d.bf16At(dab, 2*n), out)
}
