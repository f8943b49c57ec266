package cudatest

import (
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/hostloops"
)

// lnEps is the bf16 layer norm's eps, fixed in its kernels.
const lnEps = 1e-5

// LayerNorm is sdc_layer_norm. Float32: the CPU engine's loop
// (hostloops.LayerNorm), whose float32 operations and order of addition the
// kernel follows. BFloat16: the same loop over the widened bf16 input,
// weight and bias, y rounded to bf16, mean and rstd stored when asked for;
// its arguments checked as the library checks them.
func (d *Device) LayerNorm(dtype cudalib.DType, y, mean, rstd, x, w, b uintptr, rows, cols int, eps float32) error {
	if dtype == cudalib.BFloat16 {
		const call = "sdc_layer_norm"
		if err := lnCheck(call, rows, cols, y, x, w); err != nil {
			return err
		}
		if !aligned16(b) {
			return sdcArgErr(call, "bias NULL or unaligned")
		}
		if eps != lnEps {
			return sdcArgErr(call, "eps %g, the bf16 kernels' is 1e-5", eps)
		}
	} else if dtype != cudalib.Float32 {
		return sdcArgErr("sdc_layer_norm", "dtype %d", dtype)
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.layerNorm(dtype, y, mean, rstd, x, w, b, rows, cols, eps) })
		return nil
	}
	d.layerNorm(dtype, y, mean, rstd, x, w, b, rows, cols, eps)
	return nil
}

func (d *Device) layerNorm(dtype cudalib.DType, y, mean, rstd, x, w, b uintptr, rows, cols int, eps float32) {
	n := rows * cols
	if dtype == cudalib.Float32 {
		hostloops.LayerNorm(d.f32(y, n), d.f32(mean, rows), d.f32(rstd, rows), d.f32(x, n), d.f32(w, cols), d.f32(b, cols), rows, cols, eps)
		return
	}
	Y, M, R := make([]float32, n), make([]float32, rows), make([]float32, rows)
	hostloops.LayerNorm(Y, M, R, d.widen(x, n), d.widen(w, cols), d.widen(b, cols), rows, cols, lnEps)
	narrow(d.bf16At(y, n), Y)
	if mean != 0 {
		copy(d.f32At(mean, rows), M)
	}
	if rstd != 0 {
		copy(d.f32At(rstd, rows), R)
	}
}

// LayerNormBackwardScratchBytes is sdc_layer_norm_backward_scratch_bytes:
// the library's size for BFloat16 (partials of 2C floats per block of 4
// rows, at most 1024 blocks), which the emulation checks but does not use;
// none for Float32.
func (d *Device) LayerNormBackwardScratchBytes(dtype cudalib.DType, rows, cols int) (int, error) {
	switch {
	case dtype == cudalib.Float32:
		return 0, nil
	case dtype != cudalib.BFloat16:
		return 0, sdcArgErr("sdc_layer_norm_backward_scratch_bytes", "dtype %d", dtype)
	case rows <= 0 || cols <= 0:
		return 0, nil
	}
	return min((rows+3)/4, 1024) * 2 * cols * 4, nil
}

// LayerNormBackward is sdc_layer_norm_backward. Float32: dw and db cleared,
// then hostloops.LayerNormBackward (dw and db summed in row order, as the
// kernel's one thread a column adds them). BFloat16: the same loop from the
// saved fp32 mean and rstd: dx += the row's gradient (widened, added in
// float32, rounded to bf16 once), dw and db += the sums over rows (summed
// from zero, then added, as the kernel adds its partial sums).
func (d *Device) LayerNormBackward(dtype cudalib.DType, dx, dw, db, dy, x, w, mean, rstd uintptr, rows, cols int, addDX bool, scratch uintptr) error {
	if dtype == cudalib.BFloat16 {
		const call = "sdc_layer_norm_backward"
		if err := lnCheck(call, rows, cols, dx, dy, x); err != nil {
			return err
		}
		if !aligned16(w) || dw == 0 || db == 0 || mean == 0 || rstd == 0 || scratch == 0 {
			return sdcArgErr(call, "NULL or unaligned argument")
		}
		if !addDX {
			return sdcArgErr(call, "the bf16 kernel adds to dx (add_dx = 1)")
		}
		if 4*2*cols*4 > 200*1024 {
			return sdcArgErr(call, "C=%d too large", cols)
		}
	} else if dtype != cudalib.Float32 {
		return sdcArgErr("sdc_layer_norm_backward", "dtype %d", dtype)
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.layerNormBackward(dtype, dx, dw, db, dy, x, w, mean, rstd, rows, cols, addDX, scratch) })
		return nil
	}
	d.layerNormBackward(dtype, dx, dw, db, dy, x, w, mean, rstd, rows, cols, addDX, scratch)
	return nil
}

func (d *Device) layerNormBackward(dtype cudalib.DType, dx, dw, db, dy, x, w, mean, rstd uintptr, rows, cols int, addDX bool, scratch uintptr) {
	n := rows * cols
	if dtype == cudalib.Float32 {
		dwd, dbd := d.f32(dw, cols), d.f32(db, cols)
		clear(dwd)
		clear(dbd)
		hostloops.LayerNormBackward(d.f32(dx, n), dwd, dbd, d.f32(dy, n), d.f32(x, n), d.f32(w, cols), d.f32(mean, rows), d.f32(rstd, rows), rows, cols, addDX)
		return
	}
	sb, _ := d.LayerNormBackwardScratchBytes(dtype, rows, cols)
	d.bytesAt(scratch, sb)
	g := d.widen(dx, n)
	sw, sbias := make([]float32, cols), make([]float32, cols)
	hostloops.LayerNormBackward(g, sw, sbias, d.widen(dy, n), d.widen(x, n), d.widen(w, cols),
		d.f32At(mean, rows), d.f32At(rstd, rows), rows, cols, true)
	narrow(d.bf16At(dx, n), g)
	DW, DB := d.f32At(dw, cols), d.f32At(db, cols)
	for j := range cols {
		DW[j] += sw[j]
		DB[j] += sbias[j]
	}
}

// lnCheck refuses the bf16 shapes and pointers that the kernels refuse.
func lnCheck(call string, n, c int, a, b, p uintptr) error {
	if n <= 0 || c <= 0 || c%8 != 0 {
		return sdcArgErr(call, "N=%d C=%d (C must be a positive multiple of 8)", n, c)
	}
	if !aligned16(a) || !aligned16(b) || !aligned16(p) {
		return sdcArgErr(call, "NULL or not 16-byte aligned bf16 pointer")
	}
	return nil
}
