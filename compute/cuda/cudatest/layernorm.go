package cudatest

import "github.com/symddp/symddp/internal/hostloops"

// LayerNorm is sdc_layer_norm: the CPU engine's loop (hostloops.LayerNorm),
// whose float32 operations and order of addition the kernel follows.
func (d *Device) LayerNorm(y, mean, rstd, x, w, b uintptr, rows, cols int, eps float32) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.layerNorm(y, mean, rstd, x, w, b, rows, cols, eps) })
		return nil
	}
	d.layerNorm(y, mean, rstd, x, w, b, rows, cols, eps)
	return nil
}

func (d *Device) layerNorm(y, mean, rstd, x, w, b uintptr, rows, cols int, eps float32) {
	n := rows * cols
	hostloops.LayerNorm(d.f32(y, n), d.f32(mean, rows), d.f32(rstd, rows), d.f32(x, n), d.f32(w, cols), d.f32(b, cols), rows, cols, eps)
}

// LayerNormBackward is sdc_layer_norm_backward: dw and db cleared, then
// hostloops.LayerNormBackward (dw and db summed in row order, as the kernel's
// one thread a column adds them).
func (d *Device) LayerNormBackward(dx, dw, db, dy, x, w, mean, rstd uintptr, rows, cols int, addDX bool) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.layerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, cols, addDX) })
		return nil
	}
	d.layerNormBackward(dx, dw, db, dy, x, w, mean, rstd, rows, cols, addDX)
	return nil
}

func (d *Device) layerNormBackward(dx, dw, db, dy, x, w, mean, rstd uintptr, rows, cols int, addDX bool) {
	n := rows * cols
	dwd, dbd := d.f32(dw, cols), d.f32(db, cols)
	clear(dwd)
	clear(dbd)
	hostloops.LayerNormBackward(d.f32(dx, n), dwd, dbd, d.f32(dy, n), d.f32(x, n), d.f32(w, cols), d.f32(mean, rows), d.f32(rstd, rows), rows, cols, addDX)
}
