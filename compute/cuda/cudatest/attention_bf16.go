package cudatest

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/internal/cudalib"
)

// The bf16 flash attention of cuda/symddp_compute.h (sdc_attention_bf16,
// sdc_grouped_attention_bf16 and their backward), emulated: every entry
// point checks its arguments as the library does (a bad one is an
// SD_ERR_ARG *cudalib.Error) and then runs at once, or, while the device
// captures, is recorded and runs when the graph is launched, reading the
// device memory of that moment.
//
// Numerics as bf16.go says: the sums in float64, every bf16 store rounded
// once. The backward rounds P and dS to bf16 before their products, as the
// kernels do (gptcheck's bf16 emulation, check_attention.cu); the forward's
// softmax is exact (the kernels' online softmax over tiles with a bf16 P is
// not emulated). The fp32 flash attention (attention.go) runs the same
// loops on fp32 elements, P and dS unrounded, each result rounded to
// float32 once where stored.
// The implementations (cudalib.AttentionImpl) compute the same here; the
// emulated device is a library built without cuDNN, so AttentionAuto runs
// the mma kernels where they apply, else the wmma ones, and AttentionCUDNN
// fails as the library's stub does. Scratch is only checked to lie inside
// an allocation, never used.

// attCall is a checked call of the emulated attention: what it runs
// (recorded while the device captures).
func (d *Device) attCall(run func()) error {
	if d.capture {
		d.recorded = append(d.recorded, run)
		return nil
	}
	run()
	return nil
}

// ---- the library's rules of shapes ----

// wmmaWhy: why the wmma kernels do not take a shape ("" when they do): a
// head size of 32 or 64, T a multiple of 64, at most 65535 sequences'
// heads (their grid).
func wmmaWhy(b, t, nh, hs int) string {
	switch {
	case hs != 32 && hs != 64:
		return fmt.Sprintf("head size %d (want 32 or 64)", hs)
	case t%64 != 0:
		return fmt.Sprintf("T=%d is not a multiple of 64", t)
	case b*nh > 65535:
		return fmt.Sprintf("B*NH=%d too large", b*nh)
	}
	return ""
}

// mmaSupported: the mma kernels' shapes (head size 64, T a multiple of 128).
func mmaSupported(t, c, nh int) bool { return t > 0 && nh > 0 && c == nh*64 && t%128 == 0 }

// mmaWhy: why the mma kernels do not take a shape of packed qkv ("" when they do).
func mmaWhy(b, t, c, nh int) string {
	switch {
	case !mmaSupported(t, c, nh):
		return fmt.Sprintf("B=%d T=%d C=%d NH=%d (want head size 64, T a multiple of 128)", b, t, c, nh)
	case b*nh > 65535:
		return fmt.Sprintf("B*NH=%d too large", b*nh)
	}
	return ""
}

func implOK(impl cudalib.AttentionImpl) bool {
	return impl >= cudalib.AttentionAuto && impl <= cudalib.AttentionCUDNN
}

// packedOK: positive sizes, C a multiple of NH, every index of qkv within an int32.
func packedOK(b, t, c, nh int) bool {
	return b > 0 && t > 0 && c > 0 && nh > 0 && c%nh == 0 && b*t <= math.MaxInt32/3/c
}

// groupedOK: positive sizes, NH a multiple of KVH, every index of q within an int32.
func groupedOK(b, t, nh, kvh, hs int) bool {
	return b > 0 && t > 0 && nh > 0 && kvh > 0 && hs > 0 && nh%kvh == 0 && nh <= math.MaxInt32/hs && b*t <= math.MaxInt32/(nh*hs)
}

// packedImpl: the arguments' checks of the packed launchers before their
// pointers'.
func packedImpl(call string, impl cudalib.AttentionImpl, b, t, c, nh int) error {
	if !implOK(impl) {
		return sdcArgErr(call, "no context, or impl %d", impl)
	}
	if !packedOK(b, t, c, nh) {
		return sdcArgErr(call, "B=%d T=%d C=%d NH=%d", b, t, c, nh)
	}
	return nil
}

// packedShape: the kernels impl (AttentionAuto resolved) runs on packed qkv
// at a shape, or why not.
func packedShape(call string, impl cudalib.AttentionImpl, b, t, c, nh int) (cudalib.AttentionImpl, error) {
	if impl == cudalib.AttentionAuto {
		impl = cudalib.AttentionWMMA
		if mmaSupported(t, c, nh) {
			impl = cudalib.AttentionMMA
		}
	}
	why := ""
	switch impl {
	case cudalib.AttentionCUDNN:
		return impl, sdcArgErr(call+" (cudnn)", "this library was built without cuDNN")
	case cudalib.AttentionMMA:
		why = mmaWhy(b, t, c, nh)
	default:
		why = wmmaWhy(b, t, nh, c/nh)
	}
	if why != "" {
		return impl, sdcArgErr(fmt.Sprintf("%s (%s)", call, impl), "%s", why)
	}
	return impl, nil
}

// ---- GPT-2's attention on packed qkv ----

// AttentionBF16 is sdc_attention_bf16: attentionFwd on packed qkv.
func (d *Device) AttentionBF16(impl cudalib.AttentionImpl, out, lse, qkv uintptr, b, t, c, nh int) error {
	const call = "sdc_attention_bf16"
	if err := packedImpl(call, impl, b, t, c, nh); err != nil {
		return err
	}
	if lse == 0 || !aligned16(out) || !aligned16(qkv) {
		return sdcArgErr(call, "NULL or unaligned pointer")
	}
	if _, err := packedShape(call, impl, b, t, c, nh); err != nil {
		return err
	}
	return d.attCall(func() { d.attentionFwd(out, lse, packedIO(qkv, 0, c, nh), b, t, c/nh) })
}

// AttentionBackwardBF16 is sdc_attention_backward_bf16: attentionBwd on
// packed qkv.
func (d *Device) AttentionBackwardBF16(impl cudalib.AttentionImpl, dqkv, dout, qkv, out, lse uintptr, b, t, c, nh int, scratch uintptr) error {
	const call = "sdc_attention_backward_bf16"
	if err := packedImpl(call, impl, b, t, c, nh); err != nil {
		return err
	}
	if lse == 0 || scratch == 0 || !aligned16(dqkv) || !aligned16(dout) || !aligned16(qkv) || !aligned16(out) {
		return sdcArgErr(call, "NULL or unaligned pointer")
	}
	impl, err := packedShape(call, impl, b, t, c, nh)
	if err != nil {
		return err
	}
	sb, _ := d.AttentionBackwardBF16ScratchBytes(impl, b, t, c, nh)
	return d.attCall(func() {
		d.bytesAt(scratch, sb)
		d.attentionBwd(packedIO(qkv, dqkv, c, nh), dout, out, lse, b, t, c/nh)
	})
}

// AttentionBackwardBF16ScratchBytes is sdc_attention_backward_bf16_scratch_bytes:
// D (one float a row) for the wmma kernels, and where the mma kernels run
// their bf16 dS^T tiles besides (64 x 64, one per pair of 64-row query and
// key tiles on or below the diagonal); 0 where impl's kernels do not take
// the shape, and always for AttentionCUDNN (no cuDNN here).
func (d *Device) AttentionBackwardBF16ScratchBytes(impl cudalib.AttentionImpl, b, t, c, nh int) (int, error) {
	if !implOK(impl) {
		return 0, sdcArgErr("sdc_attention_backward_bf16_scratch_bytes", "no context, or impl %d", impl)
	}
	if !packedOK(b, t, c, nh) {
		return 0, nil
	}
	impl, err := packedShape("", impl, b, t, c, nh)
	if err != nil {
		return 0, nil
	}
	return attScratchBytes(impl == cudalib.AttentionMMA, b, t, nh), nil
}

// attScratchBytes: the backward's scratch of the mma or the wmma kernels.
func attScratchBytes(mma bool, b, t, nh int) int {
	rows := b * nh * t
	if mma {
		nt := t / 64
		return rows*4 + b*nh*nt*(nt+1)/2*64*64*2
	}
	return rows * 4
}

// AttentionBF16Supported is sdc_attention_bf16_supported: whether impl's
// kernels take the shape (never cuDNN's here).
func (d *Device) AttentionBF16Supported(impl cudalib.AttentionImpl, b, t, c, nh int) (bool, error) {
	if !implOK(impl) {
		return false, sdcArgErr("sdc_attention_bf16_supported", "no context, or impl %d", impl)
	}
	if !packedOK(b, t, c, nh) {
		return false, nil
	}
	_, err := packedShape("", impl, b, t, c, nh)
	return err == nil, nil
}

// attIO is where attention's operands lie, as the kernels' sdc_att_io
// (cuda/sd_compute_attention.cuh): query head h of row r at q + r·ldq + h·hs, its key
// and value at k + r·ldkv + (h/grp)·hs and v likewise; the gradients at
// the same offsets of dq, dk, dv; every operand but lse of element type dt.
// GPT-2's packed qkv in bf16 is packedIO.
type attIO struct {
	dt                  cudalib.DType
	q, k, v, dq, dk, dv uintptr
	ldq, ldkv, nh, grp  int
}

// packedIO is GPT-2's bf16 qkv (B,T,3C) (and dqkv) as an attIO.
func packedIO(qkv, dqkv uintptr, c, nh int) attIO {
	io := attIO{dt: cudalib.BFloat16, q: qkv, k: qkv + uintptr(2*c), v: qkv + uintptr(4*c), ldq: 3 * c, ldkv: 3 * c, nh: nh, grp: 1}
	if dqkv != 0 {
		io.dq, io.dk, io.dv = dqkv, dqkv+uintptr(2*c), dqkv+uintptr(4*c)
	}
	return io
}

// room is n zeroed float64s of the device's room for the attention's
// copies, reused from call to call: the fp32 attention plans allocate
// nothing per call (computetest's NoAllocs), nor may their emulation after
// the first. take carves it.
func (d *Device) room(n int) []float64 {
	if cap(d.attRoom) < n {
		d.attRoom = make([]float64, n)
	}
	r := d.attRoom[:n]
	clear(r)
	return r
}

// take is the first n of *room, which moves past them.
func take(room *[]float64, n int) []float64 {
	s := (*room)[:n:n]
	*room = (*room)[n:]
	return s
}

// attentionFwd: gptcheck's attention_fwd_ref (check_attention.cu: exact
// softmax in float64 of the scores scaled by 1/sqrt(hs)); out rounded to
// its type, lse to float32. Query head h reads key/value head h/grp.
func (d *Device) attentionFwd(out, lse uintptr, io attIO, b, t, hs int) {
	nh, c := io.nh, io.nh*hs
	kw := nh / io.grp * hs
	scale := 1 / math.Sqrt(float64(hs))
	// Q, K and V span their rows, indexed as the device memory from q, k, v
	nq, nk := extent(b*t, c, io.ldq), extent(b*t, kw, io.ldkv)
	room := d.room(nq + 2*nk + b*t*c + t)
	Q, K, V := d.loadInto(io.dt, io.q, take(&room, nq)), d.loadInto(io.dt, io.k, take(&room, nk)), d.loadInto(io.dt, io.v, take(&room, nk))
	O, p, L := take(&room, b*t*c), take(&room, t), d.f32At(lse, b*nh*t)
	for bb := 0; bb < b; bb++ {
		for h := 0; h < nh; h++ {
			kh := h / io.grp * hs
			for i := 0; i < t; i++ {
				q := Q[(bb*t+i)*io.ldq+h*hs:][:hs]
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					k := K[(bb*t+j)*io.ldkv+kh:][:hs]
					var s float64
					for x := range q {
						s += q[x] * k[x]
					}
					p[j] = s * scale
					mx = math.Max(mx, p[j])
				}
				var sum float64
				for j := 0; j <= i; j++ {
					p[j] = math.Exp(p[j] - mx)
					sum += p[j]
				}
				L[(bb*nh+h)*t+i] = float32(mx + math.Log(sum))
				o := O[(bb*t+i)*c+h*hs:][:hs]
				for j := 0; j <= i; j++ {
					v := V[(bb*t+j)*io.ldkv+kh:][:hs]
					for x := range o {
						o[x] += p[j] / sum * v[x]
					}
				}
			}
		}
	}
	d.storeC(io.dt, out, O)
}

// attentionBwd: gptcheck's attention_bwd_ref (check_attention.cu) with
// emulate on, from the out and lse given: D_i = dout_i . out_i,
// P = exp(S scale - lse), dS = P (dP - D) scale; in bf16 P and dS rounded
// to bf16 (from float32, as __float2bfloat16) before dV = P^T dout,
// dK = dS^T Q, dQ = dS K; sums in float64 (a key/value head's over its
// group's query heads in order), every element of dq, dk and dv WRITTEN,
// rounded to their type.
func (d *Device) attentionBwd(io attIO, dout, out, lse uintptr, b, t, hs int) {
	nh, c := io.nh, io.nh*hs
	kw := nh / io.grp * hs
	scale := 1 / math.Sqrt(float64(hs))
	nq, nk, no := extent(b*t, c, io.ldq), extent(b*t, kw, io.ldkv), b*t*c
	room := d.room(2*nq + 4*nk + 2*no + 4*t)
	Q, K, V := d.loadInto(io.dt, io.q, take(&room, nq)), d.loadInto(io.dt, io.k, take(&room, nk)), d.loadInto(io.dt, io.v, take(&room, nk))
	DO, O := d.loadInto(io.dt, dout, take(&room, no)), d.loadInto(io.dt, out, take(&room, no))
	L := d.f32At(lse, b*nh*t)
	GQ, GK, GV := take(&room, nq), take(&room, nk), take(&room, nk)
	p, dp, pr, ds := take(&room, t), take(&room, t), take(&room, t), take(&room, t)
	round := func(x float64) float64 { return x }
	if io.dt == cudalib.BFloat16 {
		round = func(x float64) float64 { return bf16ToF64(bf16FromF32(float32(x))) }
	}
	for bb := 0; bb < b; bb++ {
		for h := 0; h < nh; h++ {
			kh := h / io.grp * hs
			for i := 0; i < t; i++ {
				qrow := (bb*t+i)*io.ldq + h*hs
				q := Q[qrow:][:hs]
				dO := DO[(bb*t+i)*c+h*hs:][:hs]
				o := O[(bb*t+i)*c+h*hs:][:hs]
				li := float64(L[(bb*nh+h)*t+i])
				var D float64
				for x := range dO {
					D += dO[x] * o[x]
				}
				for j := 0; j <= i; j++ {
					krow := (bb*t+j)*io.ldkv + kh
					k, v := K[krow:][:hs], V[krow:][:hs]
					var s, tt float64
					for x := range q {
						s += q[x] * k[x]
						tt += dO[x] * v[x]
					}
					p[j] = math.Exp(s*scale - li)
					dp[j] = tt
				}
				for j := 0; j <= i; j++ {
					pr[j] = round(p[j])
					ds[j] = round(p[j] * (dp[j] - D) * scale)
				}
				dq := GQ[qrow:][:hs]
				for j := 0; j <= i; j++ {
					krow := (bb*t+j)*io.ldkv + kh
					k := K[krow:][:hs]
					dk, dv := GK[krow:][:hs], GV[krow:][:hs]
					for x := range dq {
						dq[x] += ds[j] * k[x]
						dk[x] += ds[j] * q[x]
						dv[x] += pr[j] * dO[x]
					}
				}
			}
		}
	}
	for _, gr := range []struct {
		dst     uintptr
		sum     []float64
		ld, wid int
	}{{io.dq, GQ, io.ldq, c}, {io.dk, GK, io.ldkv, kw}, {io.dv, GV, io.ldkv, kw}} {
		for r := 0; r < b*t; r++ {
			d.storeC(io.dt, gr.dst+uintptr(r*gr.ld*io.dt.Size()), gr.sum[r*gr.ld:][:gr.wid])
		}
	}
}

// groupedIO is grouped-query attention's three bf16 tensors as an attIO.
func groupedIO(qkv, dqkv uintptr, nh, kvh, hs int) attIO {
	ko, vo, ld := uintptr(2*nh*hs), uintptr(2*(nh+kvh)*hs), (nh+2*kvh)*hs
	io := attIO{dt: cudalib.BFloat16, q: qkv, k: qkv + ko, v: qkv + vo, ldq: ld, ldkv: ld, nh: nh, grp: nh / kvh}
	if dqkv != 0 {
		io.dq, io.dk, io.dv = dqkv, dqkv+ko, dqkv+vo
	}
	return io
}

// ---- grouped-query attention ----

// groupedImpl: the kernels impl (AttentionAuto resolved: mma where it
// applies, else wmma) runs for grouped attention at a shape, or why not.
func groupedImpl(call string, impl cudalib.AttentionImpl, b, t, nh, kvh, hs int) (cudalib.AttentionImpl, error) {
	if !implOK(impl) {
		return impl, sdcArgErr(call, "no context, or impl %d", impl)
	}
	if !groupedOK(b, t, nh, kvh, hs) {
		return impl, sdcArgErr(call, "B=%d T=%d NH=%d KVH=%d HS=%d (want NH a multiple of KVH)", b, t, nh, kvh, hs)
	}
	if impl == cudalib.AttentionCUDNN {
		return impl, sdcArgErr(call+" (cudnn)", "this library was built without cuDNN")
	}
	if why := wmmaWhy(b, t, nh, hs); why != "" {
		return impl, sdcArgErr(call, "%s", why)
	}
	mma := hs == 64 && mmaSupported(t, nh*hs, nh)
	if impl == cudalib.AttentionMMA && !mma {
		return impl, sdcArgErr(call+" (mma)", "B=%d T=%d NH=%d KVH=%d HS=%d (want head size 64, T a multiple of 128)", b, t, nh, kvh, hs)
	}
	if impl == cudalib.AttentionAuto {
		impl = cudalib.AttentionWMMA
		if mma {
			impl = cudalib.AttentionMMA
		}
	}
	return impl, nil
}

// GroupedAttentionBF16Supported is sdc_grouped_attention_bf16_supported:
// whether impl's kernels take the shape (never cuDNN's here).
func (d *Device) GroupedAttentionBF16Supported(impl cudalib.AttentionImpl, b, t, nh, kvh, hs int) (bool, error) {
	if !implOK(impl) {
		return false, sdcArgErr("sdc_grouped_attention_bf16_supported", "no context, or impl %d", impl)
	}
	if !groupedOK(b, t, nh, kvh, hs) {
		return false, nil
	}
	_, err := groupedImpl("", impl, b, t, nh, kvh, hs)
	return err == nil, nil
}

// GroupedAttentionBF16 is sdc_grouped_attention_bf16: attentionFwd on the
// packed qkv.
func (d *Device) GroupedAttentionBF16(impl cudalib.AttentionImpl, out, lse, qkv uintptr, b, t, nh, kvh, hs int) error {
	const call = "sdc_grouped_attention_bf16"
	if _, err := groupedImpl(call, impl, b, t, nh, kvh, hs); err != nil {
		return err
	}
	if lse == 0 || !aligned16(out) || !aligned16(qkv) || hs%8 != 0 {
		return sdcArgErr(call, "NULL or unaligned pointer, or a head size that is not a multiple of 8")
	}
	io := groupedIO(qkv, 0, nh, kvh, hs)
	return d.attCall(func() { d.attentionFwd(out, lse, io, b, t, hs) })
}

// GroupedAttentionBackwardBF16ScratchBytes is
// sdc_grouped_attention_backward_bf16_scratch_bytes: the mma kernels'
// scratch where they run, else D's; 0 where impl's kernels do not take the
// shape.
func (d *Device) GroupedAttentionBackwardBF16ScratchBytes(impl cudalib.AttentionImpl, b, t, nh, kvh, hs int) (int, error) {
	if !implOK(impl) {
		return 0, sdcArgErr("sdc_grouped_attention_backward_bf16_scratch_bytes", "impl %d", impl)
	}
	impl, err := groupedImpl("", impl, b, t, nh, kvh, hs)
	if err != nil {
		return 0, nil
	}
	return attScratchBytes(impl == cudalib.AttentionMMA, b, t, nh), nil
}

// GroupedAttentionBackwardBF16 is sdc_grouped_attention_backward_bf16:
// attentionBwd on the packed qkv and dqkv.
func (d *Device) GroupedAttentionBackwardBF16(impl cudalib.AttentionImpl, dqkv, dout, qkv, out, lse uintptr, b, t, nh, kvh, hs int, scratch uintptr) error {
	const call = "sdc_grouped_attention_backward_bf16"
	impl, err := groupedImpl(call, impl, b, t, nh, kvh, hs)
	if err != nil {
		return err
	}
	for _, p := range []uintptr{dqkv, dout, qkv, out} {
		if !aligned16(p) || hs%8 != 0 {
			return sdcArgErr(call, "NULL or unaligned pointer, or a head size that is not a multiple of 8")
		}
	}
	if lse == 0 || scratch == 0 {
		return sdcArgErr(call, "NULL lse or scratch")
	}
	io, sb := groupedIO(qkv, dqkv, nh, kvh, hs), attScratchBytes(impl == cudalib.AttentionMMA, b, t, nh)
	return d.attCall(func() {
		d.bytesAt(scratch, sb)
		d.attentionBwd(io, dout, out, lse, b, t, hs)
	})
}
