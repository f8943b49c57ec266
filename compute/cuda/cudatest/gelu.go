package cudatest

import (
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/hostloops"
)

// Gelu is sdc_gelu. Float32: the CPU engine's loop (hostloops.GELU), whose
// float32 operations the kernel does. BFloat16: the same loop over the
// widened bf16 values, each result rounded to bf16 (the kernel's tanhf is
// not emulated bit for bit); its arguments checked as the library checks
// them.
func (d *Device) Gelu(dtype cudalib.DType, y, x uintptr, n int) error {
	const call = "sdc_gelu"
	if err := geluCheck(call, dtype, n, y, x); err != nil || n == 0 {
		return err
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.gelu(dtype, y, x, n) })
		return nil
	}
	d.gelu(dtype, y, x, n)
	return nil
}

func (d *Device) gelu(dtype cudalib.DType, y, x uintptr, n int) {
	if dtype == cudalib.Float32 {
		hostloops.GELU(d.f32(y, n), d.f32(x, n))
		return
	}
	v := make([]float32, n)
	hostloops.GELU(v, d.widen(x, n))
	narrow(d.bf16At(y, n), v)
}

// GeluBackward is sdc_gelu_backward: dx = dy * gelu'(x), hostloops.GELUBackward
// (over the widened values for BFloat16; dx may be dy or x).
func (d *Device) GeluBackward(dtype cudalib.DType, dx, dy, x uintptr, n int) error {
	const call = "sdc_gelu_backward"
	if err := geluCheck(call, dtype, n, dx, dy, x); err != nil || n == 0 {
		return err
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.geluBackward(dtype, dx, dy, x, n) })
		return nil
	}
	d.geluBackward(dtype, dx, dy, x, n)
	return nil
}

func (d *Device) geluBackward(dtype cudalib.DType, dx, dy, x uintptr, n int) {
	if dtype == cudalib.Float32 {
		hostloops.GELUBackward(d.f32(dx, n), d.f32(dy, n), d.f32(x, n))
		return
	}
	g := d.widen(dy, n)
	hostloops.GELUBackward(g, g, d.widen(x, n))
	narrow(d.bf16At(dx, n), g)
}

// geluCheck refuses what sdc_gelu and sdc_gelu_backward refuse: a negative
// n, a NULL pointer, an unaligned bf16 one, another dtype.
func geluCheck(call string, dtype cudalib.DType, n int, ptrs ...uintptr) error {
	if n < 0 {
		return sdcArgErr(call, "n=%d", n)
	}
	for _, p := range ptrs {
		if n > 0 && p == 0 {
			return sdcArgErr(call, "NULL pointer")
		}
		if dtype == cudalib.BFloat16 && p%16 != 0 {
			return sdcArgErr(call, "bf16 pointer %#x not 16-byte aligned", p)
		}
	}
	if dtype != cudalib.Float32 && dtype != cudalib.BFloat16 {
		return sdcArgErr(call, "dtype %d", dtype)
	}
	return nil
}
