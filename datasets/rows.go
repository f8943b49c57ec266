package datasets

// RowData is a Source whose samples are the rows of one array in memory
// with a label each (InMemory, ByteSamples), so that an engine with device
// memory can keep the whole set there and gather each batch by index (ddp's
// device step path with compute.DeviceRows): the host then copies indices,
// not samples.
type RowData interface {
	Source
	// RowArrays returns the source that holds the rows (the receiver
	// itself: a type that embeds a RowData and overrides its GatherBatch
	// inherits the method but returns the embedded source, so callers
	// compare it with the source they have), the rows as floats (Len rows
	// of SampleSize) or as bytes with the table of their values, and the
	// Len labels. The arrays must not be written to.
	RowArrays() (src Source, x []float32, b []byte, table *[256]float32, y []int32)
}

// RowArrays returns d's rows as floats and its labels (RowData).
func (d *InMemory) RowArrays() (Source, []float32, []byte, *[256]float32, []int32) {
	return d, d.X, nil, nil, d.Y
}

// RowArrays returns d's rows as bytes with their value table and its
// labels (RowData).
func (d *ByteSamples) RowArrays() (Source, []float32, []byte, *[256]float32, []int32) {
	return d, nil, d.X, d.table, d.Y
}
