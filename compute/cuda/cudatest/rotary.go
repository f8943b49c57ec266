package cudatest

import (
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/hostloops"
)

// Rotate is sdc_rotate: the CPU engine's loop (hostloops.Rotate) over the
// device's cos and sin table (t, hs/2), whose float32 operations the
// kernel does; in bf16 the same loop on the widened x, y rounded to bf16.
// Rows of width rotated channels lie ld elements apart; y may be x.
func (d *Device) Rotate(dt cudalib.DType, y, x, cosTab, sinTab uintptr, rows, width, ld, hs, t int, inverse bool) error {
	if err := checkDType("sdc_rotate", dt); err != nil {
		return err
	}
	if rows <= 0 || width <= 0 || ld < width || hs <= 0 || hs%2 != 0 || width%hs != 0 || t <= 0 || y == 0 || x == 0 {
		return sdcArgErr("sdc_rotate", "bad arguments (%d rows of %d, %d apart, heads of %d, %d positions)", rows, width, ld, hs, t)
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.rotate(dt, y, x, cosTab, sinTab, rows, width, ld, hs, t, inverse) })
		return nil
	}
	d.rotate(dt, y, x, cosTab, sinTab, rows, width, ld, hs, t, inverse)
	return nil
}

func (d *Device) rotate(dt cudalib.DType, y, x, cosTab, sinTab uintptr, rows, width, ld, hs, t int, inverse bool) {
	n, tab := (rows-1)*ld+width, t*(hs/2)
	cos, sin := d.f32(cosTab, tab), d.f32(sinTab, tab)
	if dt == cudalib.Float32 {
		hostloops.Rotate(d.f32(y, n), d.f32(x, n), cos, sin, rows, width, ld, hs, t, inverse)
		return
	}
	// the untouched columns widen and narrow back to their own bits
	out := d.widen(y, n)
	hostloops.Rotate(out, d.widen(x, n), cos, sin, rows, width, ld, hs, t, inverse)
	narrow(d.bf16At(y, n), out)
}
