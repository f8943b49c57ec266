package cudatest

import "github.com/symddp/symddp/internal/cudalib"

// BiasActBackwardScratchBytes is sdc_bias_act_backward_scratch_bytes: the
// library's size for BFloat16 (partials of cols floats, one per chunk of 64
// rows, at most 512), which the emulation checks but does not use; none for
// Float32.
func (d *Device) BiasActBackwardScratchBytes(dtype cudalib.DType, rows, cols int) (int, error) {
	switch {
	case dtype == cudalib.Float32:
		return 0, nil
	case dtype != cudalib.BFloat16:
		return 0, sdcArgErr("sdc_bias_act_backward_scratch_bytes", "dtype %d", dtype)
	case rows <= 0 || cols <= 0:
		return 0, nil
	}
	return min(max((rows+63)/64, 1), 512) * cols * 4, nil
}

// biasBackwardBF16 is sdc_bias_act_backward on bf16: dbias = the float64
// column sums of dy.
func (d *Device) biasBackwardBF16(dy uintptr, n, oc int, dbias uintptr, act cudalib.Activation, accumulate bool, scratch uintptr) error {
	const call = "sdc_bias_act_backward"
	if n <= 0 || oc <= 0 || oc%8 != 0 {
		return sdcArgErr(call, "bf16: N=%d OC=%d (OC a multiple of 8)", n, oc)
	}
	if dbias == 0 || scratch == 0 || !aligned16(dy) {
		return sdcArgErr(call, "bf16: NULL or unaligned pointer")
	}
	if act != cudalib.Identity || accumulate {
		return sdcArgErr(call, "bf16: the bias gradient alone (identity, written)")
	}
	run := func() {
		sb, _ := d.BiasActBackwardScratchBytes(cudalib.BFloat16, n, oc)
		d.bytesAt(scratch, sb)
		DY, DB := d.bf16At(dy, n*oc), d.f32At(dbias, oc)
		s := make([]float64, oc)
		for i := 0; i < n; i++ {
			for j := range s {
				s[j] += bf16ToF64(DY[i*oc+j])
			}
		}
		for j, v := range s {
			DB[j] = float32(v)
		}
	}
	if d.capture {
		d.recorded = append(d.recorded, run)
		return nil
	}
	run()
	return nil
}
