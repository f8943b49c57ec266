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
