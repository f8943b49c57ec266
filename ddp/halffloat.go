package ddp

import "math"

// The 16-bit floats of safetensors files. bfloat16 is the top half of a
// float32 (8 exponent bits, 7 mantissa bits); IEEE 754 binary16 (F16) has 5
// exponent bits (bias 15) and 10 mantissa bits. Both widen to float32
// exactly.

// bf16ToF32 widens a bfloat16.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// bf16FromF32 rounds f to the nearest bfloat16, ties to even; a NaN stays
// a (quiet) NaN.
func bf16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// f16ToF32 widens an IEEE binary16.
func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp == 0: // zero and subnormals: mant·2⁻²⁴, exact in float32
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// f16FromF32 rounds f to the nearest binary16, ties to even: overflow gives
// Inf, underflow subnormals or zero.
func f16FromF32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // Inf, NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal or zero: shift the full mantissa into place
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		half := uint32(1) << (shift - 1)
		r := m >> shift
		if rest := m & (1<<shift - 1); rest > half || rest == half && r&1 == 1 {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	if rest := mant & 0x1fff; rest > 0x1000 || rest == 0x1000 && r&1 == 1 {
		r++ // may carry into the exponent, up to Inf: still correct
	}
	return sign | uint16(r)
}
