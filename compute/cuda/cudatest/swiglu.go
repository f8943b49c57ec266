package cudatest

import "github.com/symddp/symddp/internal/hostloops"

// SwiGLU is sdc_swiglu: the CPU engine's loop (hostloops.SwiGLU), whose
// float32 operations the kernel does.
func (d *Device) SwiGLU(y, a, b uintptr, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.swiGLU(y, a, b, n) })
		return nil
	}
	d.swiGLU(y, a, b, n)
	return nil
}

func (d *Device) swiGLU(y, a, b uintptr, n int) {
	hostloops.SwiGLU(d.f32(y, n), d.f32(a, n), d.f32(b, n))
}

// SwiGLUBackward is sdc_swiglu_backward: hostloops.SwiGLUBackward.
func (d *Device) SwiGLUBackward(da, db, dy, a, b uintptr, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.swiGLUBackward(da, db, dy, a, b, n) })
		return nil
	}
	d.swiGLUBackward(da, db, dy, a, b, n)
	return nil
}

func (d *Device) swiGLUBackward(da, db, dy, a, b uintptr, n int) {
	hostloops.SwiGLUBackward(d.f32(da, n), d.f32(db, n), d.f32(dy, n), d.f32(a, n), d.f32(b, n))
}
