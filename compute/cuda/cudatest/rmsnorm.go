package cudatest

import "github.com/symddp/symddp/internal/hostloops"

// RMSNorm is sdc_rms_norm: the CPU engine's loop (hostloops.RMSNorm), whose
// float32 operations and order of addition the kernel follows.
func (d *Device) RMSNorm(y, rstd, x, w uintptr, rows, cols int, eps float32) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.rmsNorm(y, rstd, x, w, rows, cols, eps) })
		return nil
	}
	d.rmsNorm(y, rstd, x, w, rows, cols, eps)
	return nil
}

func (d *Device) rmsNorm(y, rstd, x, w uintptr, rows, cols int, eps float32) {
	n := rows * cols
	hostloops.RMSNorm(d.f32(y, n), d.f32(rstd, rows), d.f32(x, n), d.f32(w, cols), rows, cols, eps)
}

// RMSNormBackward is sdc_rms_norm_backward: dw cleared, then
// hostloops.RMSNormBackward (dw summed in row order, as the kernel's one
// thread a column adds it).
func (d *Device) RMSNormBackward(dx, dw, dy, x, w, rstd uintptr, rows, cols int, addDX bool) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.rmsNormBackward(dx, dw, dy, x, w, rstd, rows, cols, addDX) })
		return nil
	}
	d.rmsNormBackward(dx, dw, dy, x, w, rstd, rows, cols, addDX)
	return nil
}

func (d *Device) rmsNormBackward(dx, dw, dy, x, w, rstd uintptr, rows, cols int, addDX bool) {
	n := rows * cols
	dwd := d.f32(dw, cols)
	clear(dwd)
	hostloops.RMSNormBackward(d.f32(dx, n), dwd, d.f32(dy, n), d.f32(x, n), d.f32(w, cols), d.f32(rstd, rows), rows, cols, addDX)
}
