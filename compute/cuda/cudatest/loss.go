package cudatest

import "github.com/symddp/symddp/internal/hostloops"

// softmaxXentBF16 is sdc_softmax_xent on bf16 logits, the fused classifier:
// the losses per row (classifierBF16), the gradient in place of the logits
// when dlogits is them, then the statistics when stats is not 0
// (lossStatsBF16); its arguments checked as the library checks them.
func (d *Device) softmaxXentBF16(logits, labels uintptr, n, v, vp int, dlogits uintptr, dscale float32, useBlock bool, stats, losses uintptr) error {
	const call = "sdc_softmax_xent"
	if n <= 0 || v <= 0 || vp < v || vp%8 != 0 {
		return sdcArgErr(call, "bf16: N=%d V=%d Vp=%d (Vp >= V, a multiple of 8)", n, v, vp)
	}
	if losses == 0 || labels == 0 || !aligned16(logits) || (dlogits != 0 && dlogits != logits) || useBlock {
		return sdcArgErr(call, "bf16: NULL or unaligned pointer, dlogits not the logits, or the step block")
	}
	run := func() {
		d.classifierBF16(losses, logits, labels, n, v, vp, dscale, dlogits != 0)
		if stats != 0 {
			d.lossStatsBF16(stats, losses, labels, n)
		}
	}
	if d.capture {
		d.recorded = append(d.recorded, run)
		return nil
	}
	run()
	return nil
}

// classifierBF16: per row, lse = max + log(sum exp(x - max)) over the V real
// columns in float64; loss = lse - x[target] (0 where the target is not in
// [0,V), as the kernel: -1 is the ignored row); with writeGrad the row
// becomes (exp(x - lse) - onehot) * dscale in bf16, 0 in the padding and in
// ignored rows.
func (d *Device) classifierBF16(losses, logits, targets uintptr, n, v, vp int, dscale float32, writeGrad bool) {
	Ls, X, Tg := d.f32At(losses, n), d.bf16At(logits, n*vp), d.i32At(targets, n)
	x, gr := make([]float32, v), make([]float32, v)
	for i := 0; i < n; i++ {
		row := X[i*vp : (i+1)*vp]
		tgt := int(Tg[i])
		if tgt < 0 || tgt >= v { // ignored: no loss, no gradient
			Ls[i] = 0
			if writeGrad {
				clear(row)
			}
			continue
		}
		for j := range x {
			x[j] = bf16ToF32(row[j])
		}
		// the CPU engine's row (internal/hostloops): log-sum-exp in
		// float64 from the widened logits, the gradient times dscale
		loss, _ := hostloops.SoftmaxXentRow(x, gr, tgt, dscale)
		Ls[i] = float32(loss)
		if writeGrad {
			narrow(row[:v], gr)
			clear(row[v:])
		}
	}
}

// lossStatsBF16: stats[0] += the float64 sum of losses, stats[2] += the
// count of targets other than -1, each rounded to float32 then added.
func (d *Device) lossStatsBF16(stats, losses, targets uintptr, n int) {
	S, Ls, Tg := d.f32At(stats, 3), d.f32At(losses, n), d.i32At(targets, n)
	var l, c float64
	for i := 0; i < n; i++ {
		l += float64(Ls[i])
		if Tg[i] != -1 {
			c++
		}
	}
	S[0] += float32(l)
	S[2] += float32(c)
}
