package cudatest

import (
	"math"

	"github.com/symddp/symddp/internal/hostloops"
)

// adamwHyperBytes is sizeof(sdc_adamw_hyper): six floats, step, pad.
const adamwHyperBytes = 32

// AdamWBF16 is sdc_adamw_bf16 (see adamwBF16); its arguments checked as
// the library checks them. While capturing, the hyperparameters are read
// when the graph is launched.
func (d *Device) AdamWBF16(params, paramsBF16, grads, m, v, decay uintptr, chunk, n int, hyper uintptr) error {
	const call = "sdc_adamw_bf16"
	if n < 0 || params == 0 || grads == 0 || m == 0 || v == 0 || hyper == 0 || (decay != 0 && chunk <= 0) {
		return sdcArgErr(call, "n=%d chunk=%d, or a NULL pointer", n, chunk)
	}
	if n == 0 {
		return nil
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.adamwBF16(params, paramsBF16, grads, m, v, decay, chunk, n, hyper) })
		return nil
	}
	d.adamwBF16(params, paramsBF16, grads, m, v, decay, chunk, n, hyper)
	return nil
}

// adamwBF16: the kernel's float32 operations in its order, the hyperparameters
// read from device memory now: the CPU engine's Adam loop (internal/hostloops,
// AdamW's decoupled decay per chunk) over the gradients times grad_scale:
//
//	g = grad * grad_scale; p *= 1 - lr*wd (where the chunk decays)
//	m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
//	p -= (lr / (1 - b1^step)) * m / (sqrt(v) / sqrt(1 - b2^step) + eps)
func (d *Device) adamwBF16(params, paramsBF16, grads, m, v, decay uintptr, chunk, n int, hyper uintptr) {
	d.bytesAt(hyper, adamwHyperBytes)
	h := d.f32At(hyper, 6)
	lr, b1, b2, eps, wd, gs := h[0], h[1], h[2], h[3], h[4], h[5]
	step := float32(d.i32At(hyper+24, 1)[0])
	bc1 := 1 - float32(math.Pow(float64(b1), float64(step)))
	bc2 := 1 - float32(math.Pow(float64(b2), float64(step)))
	a := hostloops.AdamArgs{Beta1: b1, Beta2: b2, C1: 1 - b1, C2: 1 - b2, Eps: eps, StepSize: lr / bc1,
		BC2Sqrt: float32(math.Sqrt(float64(bc2)))}
	P, G, M, V := d.f32At(params, n), d.f32At(grads, n), d.f32At(m, n), d.f32At(v, n)
	var dec []byte
	if decay != 0 {
		dec = d.bytesAt(decay, (n+chunk-1)/chunk)
	} else {
		chunk = n // one chunk, decaying
	}
	scaled := make([]float32, chunk)
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		for i := lo; i < hi; i++ {
			scaled[i-lo] = G[i] * gs
		}
		a.Decay = 1
		if dec == nil || dec[lo/chunk] != 0 {
			a.Decay = 1 - lr*wd
		}
		hostloops.Adam(P[lo:hi], scaled[:hi-lo], M[lo:hi], V[lo:hi], &a)
	}
	if paramsBF16 != 0 {
		PB := d.bf16At(paramsBF16, n)
		for i, p := range P {
			PB[i] = bf16FromF32(p)
		}
	}
}
