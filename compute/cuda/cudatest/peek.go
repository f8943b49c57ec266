package cudatest

// Bytes returns the n bytes at device address p as the emulated device
// holds them (aliased, not copied), for test doubles that stand in for
// other devices' access to this one (an emulated multi-PE comm backend
// reading its peers' buffers).
func (d *Device) Bytes(p uintptr, n int) []byte { return d.bytesAt(p, n) }

// BF16 is f rounded to bf16 bits as the kernels round (to nearest even,
// NaN to 0x7fc0), and F32 the bf16 bits h widened (exact): for test
// doubles that hold bf16 data, such as an emulated comm's reductions.
func BF16(f float32) uint16 { return bf16FromF32(f) }

// F32 widens the bf16 bits h to float32 (see BF16).
func F32(h uint16) float32 { return bf16ToF32(h) }
