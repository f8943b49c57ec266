package cudatest

import (
	"math"

	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/hostloops"
)

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

// AttentionF32 is sdc_attention_f32: attentionFwd on fp32 q, k, v in the
// layout of ldq and ldkv (the kernel's online softmax over 64 x 64 tiles
// is not emulated: its sums in another order agree to fp32 rounding).
func (d *Device) AttentionF32(out, lse, q, k, v uintptr, ldq, ldkv, b, t, nh, kvh, hs int) error {
	const call = "sdc_attention_f32"
	if err := attF32Sizes(call, ldq, ldkv, b, t, nh, kvh, hs); err != nil {
		return err
	}
	if out == 0 || lse == 0 || q == 0 || k == 0 || v == 0 {
		return sdcArgErr(call, "NULL pointer")
	}
	io := attIO{dt: cudalib.Float32, q: q, k: k, v: v, ldq: ldq, ldkv: ldkv, nh: nh, grp: nh / kvh}
	// not attCall: its closure would be made on every call, and the fp32
	// plans allocate nothing per call (computetest's NoAllocs)
	if d.capture {
		d.recorded = append(d.recorded, func() { d.attentionFwd(out, lse, io, b, t, hs) })
		return nil
	}
	d.attentionFwd(out, lse, io, b, t, hs)
	return nil
}

// AttentionBackwardF32 is sdc_attention_backward_f32: attentionBwd on
// fp32 tensors, dq, dk and dv at q's, k's and v's offsets. scratch (D, one
// float a row, and the causal dS tiles: cudalib.AttentionF32ScratchFloats)
// is only checked to lie inside an allocation.
func (d *Device) AttentionBackwardF32(dq, dk, dv, dout, q, k, v, out, lse uintptr, ldq, ldkv, b, t, nh, kvh, hs int, scratch uintptr) error {
	const call = "sdc_attention_backward_f32"
	if err := attF32Sizes(call, ldq, ldkv, b, t, nh, kvh, hs); err != nil {
		return err
	}
	for _, p := range []uintptr{dq, dk, dv, dout, q, k, v, out, lse, scratch} {
		if p == 0 {
			return sdcArgErr(call, "NULL pointer")
		}
	}
	d.bytesAt(scratch, 4*cudalib.AttentionF32ScratchFloats(b, nh, t))
	io := attIO{dt: cudalib.Float32, q: q, k: k, v: v, dq: dq, dk: dk, dv: dv, ldq: ldq, ldkv: ldkv, nh: nh, grp: nh / kvh}
	if d.capture { // as AttentionF32's
		d.recorded = append(d.recorded, func() { d.attentionBwd(io, dout, out, lse, b, t, hs) })
		return nil
	}
	d.attentionBwd(io, dout, out, lse, b, t, hs)
	return nil
}

// attF32Sizes is the fp32 launchers' check of their sizes: every one at
// least 1, HS at most 64 (a tile's width), NH a multiple of KVH, rows no
// narrower than their heads, and every byte offset within an int64
// (B·T·max(ldq, ldkv) <= 2^60; NH·HS <= ldq) and every grid within an int
// (NH <= MaxInt32/64, B·NH·T <= 8·MaxInt32), and the backward's scratch
// within 2^60 floats (B·NH·nb(nb+1)/2 tiles <= 2^48, nb = ceil(T/64)), as
// the launchers check. Divisions keep the check itself from overflowing.
func attF32Sizes(call string, ldq, ldkv, b, t, nh, kvh, hs int) error {
	const limit = 1 << 60
	ok := b >= 1 && t >= 1 && nh >= 1 && kvh >= 1 && hs >= 1 && hs <= 64 && nh <= math.MaxInt32/64 && nh%kvh == 0 &&
		nh <= ldq/hs && kvh <= ldkv/hs && t <= limit/b && b*t <= limit/max(ldq, ldkv) && b*nh*t <= 8*math.MaxInt32
	if nb := (t + 63) / 64; ok {
		ok = nb*(nb+1)/2 <= (1<<48)/(b*nh)
	}
	if !ok {
		return sdcArgErr(call, "B=%d T=%d NH=%d KVH=%d HS=%d ldq=%d ldkv=%d (want sizes >= 1, HS <= 64, NH a multiple of KVH, ldq >= NH*HS, ldkv >= KVH*HS)",
			b, t, nh, kvh, hs, ldq, ldkv)
	}
	return nil
}
