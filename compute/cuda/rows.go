package cuda

import (
	"fmt"
	"unsafe"

	"github.com/symddp/symddp/compute"
)

// A dataset resident in device memory (compute.DeviceRows): the rows
// copied once, each batch gathered by index on the device (sdc_gather_rows),
// byte rows through their value table, so the batch has the host gather's
// bits.

var _ compute.DeviceRows = (*Engine)(nil)

// residentRows are rows in the engine's pool.
type residentRows struct {
	e          *Engine
	ptr, table uintptr // table: 0 for float rows
	rows, cols int
	bytes      int64
	key        rowsKey
}

func (r *residentRows) Rows() int    { return r.rows }
func (r *residentRows) Cols() int    { return r.cols }
func (r *residentRows) Bytes() int64 { return r.bytes }

// rowsKey identifies the host arrays of an upload.
type rowsKey struct {
	data  uintptr
	n     int
	table *[256]float32
	cols  int
}

// UploadRows copies x (floats) or b (bytes with their value table) of cols
// values a row to device memory once per set of arrays (the engine keeps
// them until it closes).
func (e *Engine) UploadRows(x []float32, b []byte, table *[256]float32, cols int) (compute.ResidentRows, error) {
	if cols <= 0 || (x == nil) == (b == nil) || (b != nil && table == nil) {
		return nil, fmt.Errorf("cuda: UploadRows: give float rows, or byte rows with a table, of cols > 0 (cols %d)", cols)
	}
	var src unsafe.Pointer
	var n, bytes int
	if x != nil {
		n, bytes = len(x), 4*len(x)
		if n > 0 {
			src = unsafe.Pointer(&x[0])
		}
	} else {
		n, bytes = len(b), len(b)
		if n > 0 {
			src = unsafe.Pointer(&b[0])
		}
	}
	if n == 0 || n%cols != 0 {
		return nil, fmt.Errorf("cuda: UploadRows: %d values are not rows of %d", n, cols)
	}
	key := rowsKey{data: uintptr(src), n: n, table: table, cols: cols}
	for _, r := range e.rows {
		if r.key == key {
			return r, nil
		}
	}
	r := &residentRows{e: e, rows: n / cols, cols: cols, bytes: int64(bytes), key: key}
	r.ptr = e.alloc("UploadRows", bytes)
	if err := e.dev.HtoD(false, r.ptr, src, bytes); err != nil {
		return nil, fmt.Errorf("cuda: UploadRows: %w", err)
	}
	if table != nil {
		t := e.Alloc(256).(*Tensor)
		e.SetTensor(t, table[:])
		r.table, r.bytes = t.ptr, r.bytes+4*256
	}
	if err := e.Sync(); err != nil {
		return nil, err
	}
	e.rows = append(e.rows, r)
	return r, nil
}

// GatherResident writes rows idx of r into dst (len(idx), cols): one kernel.
func (e *Engine) GatherResident(dst compute.Tensor, r compute.ResidentRows, idx compute.Labels) {
	const op = "GatherResident"
	d, rows, cols := e.matrix(op, dst)
	rr, ok := r.(*residentRows)
	if !ok || rr.e != e {
		panic(fmt.Sprintf("cuda: %s: rows %T are not this engine's", op, r))
	}
	ix := e.labelsOf(op, idx)
	if cols != rr.cols || rows != len(ix.host) {
		panic(fmt.Sprintf("cuda: %s: %d indices into a batch of shape %v from rows of %d", op, len(ix.host), []int(d.shape), rr.cols))
	}
	e.fail(op, e.dev.GatherRows(d.ptr, rr.ptr, rr.table, ix.ptr, rows, cols))
}
