package cudatest

import "github.com/symddp/symddp/internal/hostloops"

// Rotate is sdc_rotate: the CPU engine's loop (hostloops.Rotate) over the
// device's cos and sin table (t, hs/2), whose float32 operations the
// kernel does. y may be x.
func (d *Device) Rotate(y, x, cosTab, sinTab uintptr, rows, width, hs, t int, inverse bool) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.rotate(y, x, cosTab, sinTab, rows, width, hs, t, inverse) })
		return nil
	}
	d.rotate(y, x, cosTab, sinTab, rows, width, hs, t, inverse)
	return nil
}

func (d *Device) rotate(y, x, cosTab, sinTab uintptr, rows, width, hs, t int, inverse bool) {
	n, tab := rows*width, t*(hs/2)
	hostloops.Rotate(d.f32(y, n), d.f32(x, n), d.f32(cosTab, tab), d.f32(sinTab, tab), rows, width, hs, t, inverse)
}
