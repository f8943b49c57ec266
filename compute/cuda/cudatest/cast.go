package cudatest

import "encoding/binary"

// CastBF16 is sdc_cast_bf16: bf16FromF32 (round to nearest even, NaN to
// 0x7fc0), the kernel's operations on the bits; its arguments checked as the
// library checks them.
func (d *Device) CastBF16(dst, src uintptr, n int) error {
	if n < 0 || (n > 0 && (dst == 0 || src == 0 || dst%2 != 0 || src%4 != 0)) {
		return sdcArgErr("sdc_cast_bf16", "n=%d dst=%#x src=%#x", n, dst, src)
	}
	if d.capture {
		d.recorded = append(d.recorded, func() { d.castBF16(dst, src, n) })
		return nil
	}
	d.castBF16(dst, src, n)
	return nil
}

func (d *Device) castBF16(dst, src uintptr, n int) {
	X, Y := d.f32At(src, n), d.bf16At(dst, n)
	for i, f := range X {
		Y[i] = bf16FromF32(f)
	}
}

// CastBF16Unless is sdc_cast_bf16_unless: CastBF16's cast unless the word
// at flag is not 0 (an Update wrote the copy); the word is 0 afterwards.
func (d *Device) CastBF16Unless(dst, src uintptr, n int, flag uintptr) error {
	if n < 0 || flag == 0 || flag%4 != 0 || (n > 0 && (dst == 0 || src == 0 || dst%2 != 0 || src%4 != 0)) {
		return sdcArgErr("sdc_cast_bf16_unless", "n=%d dst=%#x src=%#x flag=%#x", n, dst, src, flag)
	}
	run := func() {
		w := d.bytesAt(flag, 4)
		if binary.LittleEndian.Uint32(w) == 0 {
			d.castBF16(dst, src, n)
		}
		binary.LittleEndian.PutUint32(w, 0)
	}
	if d.capture {
		d.recorded = append(d.recorded, run)
		return nil
	}
	run()
	return nil
}

// CastF32 is sdc_cast_f32: the bf16 bits in the high half.
func (d *Device) CastF32(dst, src uintptr, n int) error {
	if d.capture {
		d.recorded = append(d.recorded, func() { d.castF32(dst, src, n) })
		return nil
	}
	d.castF32(dst, src, n)
	return nil
}

func (d *Device) castF32(dst, src uintptr, n int) {
	X, Y := d.bf16At(src, n), d.f32At(dst, n)
	for i, h := range X {
		Y[i] = bf16ToF32(h)
	}
}
