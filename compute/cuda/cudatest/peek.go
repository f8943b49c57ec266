package cudatest

// Bytes returns the n bytes at device address p as the emulated device
// holds them (aliased, not copied), for test doubles that stand in for
// other devices' access to this one (an emulated multi-PE comm backend
// reading its peers' buffers).
func (d *Device) Bytes(p uintptr, n int) []byte { return d.bytesAt(p, n) }
