package cudatest

import "github.com/symddp/symddp/internal/hostloops"

// Gelu is sdc_gelu: the CPU engine's loop (hostloops.GELU), whose float32
// operations the kernel does.
func (d *Device) Gelu(y, x uintptr, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.gelu(y, x, n) })
		return nil
	}
	d.gelu(y, x, n)
	return nil
}

func (d *Device) gelu(y, x uintptr, n int) { hostloops.GELU(d.f32(y, n), d.f32(x, n)) }

// GeluBackward is sdc_gelu_backward: hostloops.GELUBackward.
func (d *Device) GeluBackward(dx, dy, x uintptr, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.geluBackward(dx, dy, x, n) })
		return nil
	}
	d.geluBackward(dx, dy, x, n)
	return nil
}

func (d *Device) geluBackward(dx, dy, x uintptr, n int) {
	hostloops.GELUBackward(d.f32(dx, n), d.f32(dy, n), d.f32(x, n))
}
