package cudatest

import (
	"fmt"
	"math"

	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/hostloops"
)

// RMSNorm is sdc_rms_norm. In fp32 it is the CPU engine's loop
// (hostloops.RMSNorm), whose float32 operations and order of addition the
// kernel follows; in bf16 the kernel's bf16 form: rmsNormRow's float32
// operations over a warp's 32 lanes on the widened elements, y rounded to
// bf16, rstd fp32.
func (d *Device) RMSNorm(dt cudalib.DType, y, rstd, x, w uintptr, rows, cols int, eps float32) error {
	if err := checkDType("sdc_rms_norm", dt); err != nil {
		return err
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.rmsNorm(dt, y, rstd, x, w, rows, cols, eps) })
		return nil
	}
	d.rmsNorm(dt, y, rstd, x, w, rows, cols, eps)
	return nil
}

// checkDType refuses an element type the kernels do not take, as their
// launchers do.
func checkDType(call string, dt cudalib.DType) error {
	if dt != cudalib.Float32 && dt != cudalib.BFloat16 {
		return fmt.Errorf("%s: emulated: dtype %d: %w", call, dt, cudalib.ErrArgument)
	}
	return nil
}

func (d *Device) rmsNorm(dt cudalib.DType, y, rstd, x, w uintptr, rows, cols int, eps float32) {
	n := rows * cols
	if dt == cudalib.Float32 {
		hostloops.RMSNorm(d.f32(y, n), d.f32(rstd, rows), d.f32(x, n), d.f32(w, cols), rows, cols, eps)
		return
	}
	xs, ws, ys, rs := d.widen(x, n), d.widen(w, cols), d.bf16At(y, n), d.f32At(rstd, rows)
	out := make([]float32, cols)
	for i := range rows {
		rs[i] = rmsNormRow(out, xs[i*cols:(i+1)*cols], ws, bf16Lanes, eps)
		narrow(ys[i*cols:(i+1)*cols], out)
	}
}

// bf16Lanes is the lanes that share a row in the bf16 RMSNorm kernels (a
// warp; fp32 takes hostloops' eight).
const bf16Lanes = 32

// sumLanes is sdc_sum_lanes: the lanes' partials added pairwise,
// neighbours first (for eight lanes hostloops' sum8 tree), then the tail
// in order.
func sumLanes(part []float32, tail []float32) float32 {
	p := append([]float32(nil), part...)
	for w := 1; w < len(p); w *= 2 {
		for i := 0; i+w < len(p); i += 2 * w {
			p[i] = float32(p[i] + p[i+w])
		}
	}
	s := p[0]
	for _, t := range tail {
		s = float32(s + t)
	}
	return s
}

// rmsNormRow is the kernel's forward of one row in lanes lanes: lane a's
// partial sum of the rounded squares of elements a, a+lanes, ... of the
// row's leading multiple of lanes, the partials and then the tail's squares
// added (sumLanes), rstd = 1/sqrt(s/c + eps) (the square root correctly
// rounded) and y = (x·rstd)·w. It returns rstd.
func rmsNormRow(y, x, w []float32, lanes int, eps float32) float32 {
	c := len(x)
	lead := c &^ (lanes - 1)
	part := make([]float32, lanes)
	for j := 0; j < lead; j++ {
		part[j%lanes] = float32(part[j%lanes] + float32(x[j]*x[j]))
	}
	var tail []float32
	for j := lead; j < c; j++ {
		tail = append(tail, float32(x[j]*x[j]))
	}
	s := sumLanes(part, tail)
	v := float32(float32(s/float32(c)) + eps)
	rs := float32(1 / float32(math.Sqrt(float64(v))))
	for j := range x {
		y[j] = float32(float32(x[j]*rs) * w[j])
	}
	return rs
}

// rmsNormDXRow is the kernel's dx of one row in lanes lanes: the row sum of
// g·n (g = w·dy, n = x·rstd) as rmsNormRow adds, m = s/c, then
// dx = (g - n·m)·rstd, or dx + that when add, as float32 into out.
func rmsNormDXRow(out, dx, dy, x, w []float32, rs float32, lanes int, add bool) {
	c := len(x)
	lead := c &^ (lanes - 1)
	part := make([]float32, lanes)
	gn := func(j int) float32 { return float32(float32(w[j]*dy[j]) * float32(x[j]*rs)) }
	for j := 0; j < lead; j++ {
		part[j%lanes] = float32(part[j%lanes] + gn(j))
	}
	var tail []float32
	for j := lead; j < c; j++ {
		tail = append(tail, gn(j))
	}
	m := float32(sumLanes(part, tail) / float32(c))
	for j := range x {
		n := float32(x[j] * rs)
		g := float32(w[j] * dy[j])
		gx := float32(float32(g-float32(n*m)) * rs)
		if add {
			gx = float32(dx[j] + gx)
		}
		out[j] = gx
	}
}

// RMSNormBackward is sdc_rms_norm_backward. In fp32: dw cleared, then
// hostloops.RMSNormBackward (dw summed in row order, as the kernel's one
// thread a column adds it). In bf16: rmsNormDXRow over a warp's lanes on
// the widened elements, dx rounded to bf16 once; dw (fp32) summed in the
// kernel's chunks of rows (rmsDWChunks), each from 0 in row order, the
// chunks' sums added in chunk order.
func (d *Device) RMSNormBackward(dt cudalib.DType, dx, dw, dy, x, w, rstd uintptr, rows, cols int, addDX bool) error {
	if err := checkDType("sdc_rms_norm_backward", dt); err != nil {
		return err
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.rmsNormBackward(dt, dx, dw, dy, x, w, rstd, rows, cols, addDX) })
		return nil
	}
	d.rmsNormBackward(dt, dx, dw, dy, x, w, rstd, rows, cols, addDX)
	return nil
}

// scratchBytes is the context's scratch (sdc_ctx.scratch_bytes,
// SDC_SCRATCH_BYTES of cuda/sd_compute_ctx.cu), which bounds the bf16 dw's
// chunks.
const scratchBytes = 16 << 20

// rmsDWChunks is sdc_rms_dw_chunks: the chunks of rows of the bf16 dw's
// sum, of 128 rows, fewer and longer where the scratch holds fewer
// partials, none empty.
func rmsDWChunks(rows, cols int) (chunks, chunkRows int) {
	n := (rows + 127) / 128
	limit := min(scratchBytes/4/cols, 65535)
	if n > limit {
		n = max(limit, 1)
	}
	chunkRows = (rows + n - 1) / n
	return (rows + chunkRows - 1) / chunkRows, chunkRows
}

func (d *Device) rmsNormBackward(dt cudalib.DType, dx, dw, dy, x, w, rstd uintptr, rows, cols int, addDX bool) {
	n := rows * cols
	if dt == cudalib.Float32 {
		dwd := d.f32(dw, cols)
		clear(dwd)
		hostloops.RMSNormBackward(d.f32(dx, n), dwd, d.f32(dy, n), d.f32(x, n), d.f32(w, cols), d.f32(rstd, rows), rows, cols, addDX)
		return
	}
	xs, dys, ws, rs := d.widen(x, n), d.widen(dy, n), d.widen(w, cols), d.f32At(rstd, rows)
	dxs, dxh := d.widen(dx, n), d.bf16At(dx, n)
	out := make([]float32, cols)
	for i := range rows {
		r := i * cols
		rmsNormDXRow(out, dxs[r:r+cols], dys[r:r+cols], xs[r:r+cols], ws, rs[i], bf16Lanes, addDX)
		narrow(dxh[r:r+cols], out)
	}
	chunks, chunkRows := rmsDWChunks(rows, cols)
	dwd := d.f32At(dw, cols)
	part := make([]float32, cols)
	for k := range chunks {
		clear(part)
		for i := k * chunkRows; i < min((k+1)*chunkRows, rows); i++ {
			for j := range cols {
				nj := float32(xs[i*cols+j] * rs[i])
				part[j] = float32(part[j] + float32(nj*dys[i*cols+j]))
			}
		}
		for j := range cols {
			if k == 0 {
				dwd[j] = part[j]
			} else {
				dwd[j] = float32(dwd[j] + part[j])
			}
		}
	}
}
