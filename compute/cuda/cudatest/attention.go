package cudatest

import "github.com/symddp/symddp/internal/hostloops"

// SoftmaxCausal is sdc_softmax_causal: hostloops.SoftmaxCausal over each of
// the nmat matrices (the CPU engine's loop over its blocks of rows gives
// the same bits as over the whole matrix).
func (d *Device) SoftmaxCausal(p uintptr, nmat, t int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.softmaxCausal(p, nmat, t) })
		return nil
	}
	d.softmaxCausal(p, nmat, t)
	return nil
}

func (d *Device) softmaxCausal(p uintptr, nmat, t int) {
	P := d.f32(p, nmat*t*t)
	for i := 0; i < nmat; i++ {
		hostloops.SoftmaxCausal(P[i*t*t:(i+1)*t*t], t, 0, t, t)
	}
}

// SoftmaxCausalBackward is sdc_softmax_causal_backward:
// hostloops.SoftmaxCausalBackward over each matrix.
func (d *Device) SoftmaxCausalBackward(ds, p uintptr, nmat, t int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.softmaxCausalBackward(ds, p, nmat, t) })
		return nil
	}
	d.softmaxCausalBackward(ds, p, nmat, t)
	return nil
}

func (d *Device) softmaxCausalBackward(ds, p uintptr, nmat, t int) {
	DS, P := d.f32(ds, nmat*t*t), d.f32(p, nmat*t*t)
	for i := 0; i < nmat; i++ {
		hostloops.SoftmaxCausalBackward(DS[i*t*t:(i+1)*t*t], P[i*t*t:(i+1)*t*t], t, 0, t, t)
	}
}
