package cudatest

import (
	"fmt"

	"github.com/symddp/symddp/internal/hostloops"
)

// IndexGather is sdc_index_gather: the CPU engine's loop
// (hostloops.GatherRows). An index outside the table, which the engine
// rules out before it calls, panics here (the kernel reads it as -1).
func (d *Device) IndexGather(dst, table, idx uintptr, rows, cols, tableRows int, accumulate bool) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.indexGather(dst, table, idx, rows, cols, tableRows, accumulate) })
		return nil
	}
	d.indexGather(dst, table, idx, rows, cols, tableRows, accumulate)
	return nil
}

func (d *Device) indexGather(dst, table, idx uintptr, rows, cols, tableRows int, accumulate bool) {
	if rows == 0 || cols == 0 {
		return
	}
	ix := d.i32(idx, rows)
	badIndex("sdc_index_gather", ix, hostloops.GatherRows(d.f32(dst, rows*cols), d.f32(table, tableRows*cols), ix, cols, accumulate))
}

// IndexScatterAdd is sdc_index_scatter_add: hostloops.ScatterAddRows, which
// adds in row order as the kernel does.
func (d *Device) IndexScatterAdd(table, src, idx uintptr, rows, cols, tableRows int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.indexScatterAdd(table, src, idx, rows, cols, tableRows) })
		return nil
	}
	d.indexScatterAdd(table, src, idx, rows, cols, tableRows)
	return nil
}

func (d *Device) indexScatterAdd(table, src, idx uintptr, rows, cols, tableRows int) {
	if rows == 0 || cols == 0 || tableRows == 0 {
		return
	}
	ix := d.i32(idx, rows)
	badIndex("sdc_index_scatter_add", ix, hostloops.ScatterAddRows(d.f32(table, tableRows*cols), d.f32(src, rows*cols), ix, cols))
}

// badIndex panics when the loop found row bad's index outside the table.
func badIndex(call string, idx []int32, bad int) {
	if bad >= 0 {
		panic(fmt.Sprintf("emulated %s: row %d has index %d, outside the table", call, bad, idx[bad]))
	}
}

// ---- the bf16 token + position embedding ----

// EmbedBF16 is sdc_embed_bf16: each output element the sum of its token's
// and position's, in float64 rounded to bf16 once; its arguments checked as
// the library checks them.
func (d *Device) EmbedBF16(out, tokens, wte, wpe uintptr, b, t, c int) error {
	const call = "sdc_embed_bf16"
	if b <= 0 || t <= 0 || c <= 0 || c%8 != 0 {
		return sdcArgErr(call, "B=%d T=%d C=%d (C a multiple of 8)", b, t, c)
	}
	if tokens == 0 || !aligned16(out) || !aligned16(wte) || (wpe != 0 && !aligned16(wpe)) {
		return sdcArgErr(call, "NULL or unaligned pointer")
	}
	run := func() {
		n := b * t
		tok, Y := d.i32At(tokens, n), d.bf16At(out, n*c)
		var P []uint16 // no positions: wte's rows alone
		if wpe != 0 {
			P = d.bf16At(wpe, t*c)
		}
		for i := 0; i < n; i++ {
			if tok[i] < 0 {
				panic(fmt.Sprintf("emulated sdc_embed_bf16: token %d at position %d", tok[i], i))
			}
			W := d.bf16At(wte+uintptr(int(tok[i])*c*2), c) // panics past the table
			pos := (i % t) * c
			for j := 0; j < c; j++ {
				if P == nil {
					Y[i*c+j] = bf16FromF64(bf16ToF64(W[j]))
					continue
				}
				Y[i*c+j] = bf16FromF64(bf16ToF64(W[j]) + bf16ToF64(P[pos+j]))
			}
		}
	}
	if d.capture {
		d.recorded = append(d.recorded, run)
		return nil
	}
	run()
	return nil
}

func round256(x int) int { return (x + 255) &^ 255 }

// EmbedBackwardBF16ScratchBytes is sdc_embed_backward_bf16_scratch_bytes:
// keys and positions as the library keeps them, plus room as for its sort
// (not the library's number, which depends on CUB); the emulation uses
// none.
func (d *Device) EmbedBackwardBF16ScratchBytes(b, t, v int) (int, error) {
	if b <= 0 || t <= 0 || v <= 0 {
		return 0, nil
	}
	return 4 * round256(4*b*t), nil
}

// EmbedBackwardBF16 is sdc_embed_backward_bf16 (see embedBackwardBF16); its
// arguments checked as the library checks them.
func (d *Device) EmbedBackwardBF16(dwte, dwpe, dout, tokens uintptr, b, t, c, v int, scratch uintptr, scratchBytes int) error {
	const call = "sdc_embed_backward_bf16"
	if b <= 0 || t <= 0 || c <= 0 || c%8 != 0 || v <= 0 {
		return sdcArgErr(call, "B=%d T=%d C=%d V=%d", b, t, c, v)
	}
	if tokens == 0 || scratch == 0 || !aligned16(dwte) || (dwpe != 0 && !aligned16(dwpe)) || !aligned16(dout) || scratch%256 != 0 {
		return sdcArgErr(call, "NULL or unaligned pointer (scratch: 256 bytes)")
	}
	if want, _ := d.EmbedBackwardBF16ScratchBytes(b, t, v); scratchBytes < want {
		return sdcArgErr(call, "scratch of %d bytes, want %d", scratchBytes, want)
	}
	run := func() {
		d.bytesAt(scratch, scratchBytes)
		d.embedBackwardBF16(dwte, dwpe, dout, tokens, b, t, c, v)
	}
	if d.capture {
		d.recorded = append(d.recorded, run)
		return nil
	}
	run()
	return nil
}

// embedBackwardBF16: each token's row of dwte gets the sum of its positions'
// dout rows (increasing position order, float64), each dwpe row (when
// there is a table) the sum over b in order.
func (d *Device) embedBackwardBF16(dwte, dwpe, dout, tokens uintptr, b, t, c, v int) {
	n := b * t
	tok := d.i32At(tokens, n)
	for i, k := range tok {
		if k < 0 || int(k) >= v {
			panic(fmt.Sprintf("emulated sdc_embed_backward_bf16: token %d at position %d, V=%d", k, i, v))
		}
	}
	// The CPU engine's scatter-add (hostloops, float32, rows in position
	// order) into zeroed tables, then added once to the gradients: the
	// kernel sums each token's rows (each position's) and adds the sum.
	dy := d.widen(dout, n*c)
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i % t)
	}
	type table struct {
		grad []float32
		idx  []int32
		rows int
	}
	tables := []table{{d.f32At(dwte, v*c), tok, v}}
	if dwpe != 0 {
		tables = append(tables, table{d.f32At(dwpe, t*c), pos, t})
	}
	for _, u := range tables {
		sum := make([]float32, u.rows*c)
		hostloops.ScatterAddRows(sum, dy, u.idx, c)
		for i, s := range sum {
			u.grad[i] += s
		}
	}
}
