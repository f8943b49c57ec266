package cudatest

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/symddp/symddp/internal/hostloops"
)

// What the emulation of every operation's bf16 kernels shares: bf16
// rounding, typed views of device memory, and the CPU engine's float32
// loops over widened bf16 values.
//
// Numerics: the spec is the CPU references of cuda/gptcheck/check*.cu. bf16
// is stored as uint16 (the upper half of a float32) and read exactly. The
// layer norm, GELU (also in the GEMMs' epilogues), the embedding's
// scatter-add and the classifier's row are the CPU engine's own loops
// (internal/hostloops) over the widened bf16 values, so that the emulator
// keeps no second Go copy of them; the rest of a kernel's arithmetic
// between its loads and its stores is float64 (every sum, including the
// GEMM's products and the softmaxes), except AdamW, which does the kernel's
// float32 operations in its order. Every value a kernel stores in bf16 is
// rounded to nearest even there (a NaN becomes 0x7fc0, as gptcheck's f2bf);
// fp32 results are rounded to float32 where stored, and an fp32 tensor that
// a kernel ADDS to gets the float64 sum rounded to float32, then added in
// float32 (the kernels add their fp32 partial sum). Arguments are checked
// as the library checks them; workspaces and scratch only to lie inside an
// allocation, never used.

// aligned16: not NULL and 16-byte aligned, as the bf16 vector loads want.
func aligned16(p uintptr) bool { return p != 0 && p%16 == 0 }

// ---- bf16 ----

// bf16FromF32 rounds f to bf16 to nearest even (check_common.h's f2bf).
func bf16FromF32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return 0x7fc0
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// bf16FromF64 rounds x to bf16 to nearest even in one step: x goes to
// float32 rounded to odd (toward zero, the last bit set when inexact),
// which keeps the second rounding from ever meeting a false tie.
func bf16FromF64(x float64) uint16 {
	if math.IsNaN(x) {
		return 0x7fc0
	}
	f := float32(x)
	if float64(f) != x && !math.IsInf(x, 0) {
		u := math.Float32bits(f)
		if math.Abs(float64(f)) > math.Abs(x) {
			u-- // one step toward zero (sign and magnitude)
		}
		f = math.Float32frombits(u | 1)
	}
	return bf16FromF32(f)
}

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
func bf16ToF64(h uint16) float64 { return float64(bf16ToF32(h)) }

// ---- device memory by element ----

func (d *Device) bf16At(p uintptr, n int) []uint16 {
	if n == 0 {
		return nil
	}
	if p%2 != 0 {
		panic(fmt.Sprintf("emulated device: bf16 tensor at odd address %#x", p))
	}
	b := d.bytesAt(p, 2*n)
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
}

func (d *Device) f32At(p uintptr, n int) []float32 {
	if n == 0 {
		return nil
	}
	if p%4 != 0 {
		panic(fmt.Sprintf("emulated device: fp32 tensor at %#x, not 4-byte aligned", p))
	}
	b := d.bytesAt(p, 4*n)
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}

func (d *Device) i32At(p uintptr, n int) []int32 {
	if n == 0 {
		return nil
	}
	if p%4 != 0 {
		panic(fmt.Sprintf("emulated device: int32 tensor at %#x, not 4-byte aligned", p))
	}
	b := d.bytesAt(p, 4*n)
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), n)
}

// loadBF16 is n bf16 at p as float64s.
func (d *Device) loadBF16(p uintptr, n int) []float64 {
	h := d.bf16At(p, n)
	f := make([]float64, n)
	for i, v := range h {
		f[i] = bf16ToF64(v)
	}
	return f
}

// ---- bf16 through the CPU engine's float32 loops ----

// widen is n bf16 at p as float32s (exact).
func (d *Device) widen(p uintptr, n int) []float32 {
	f := make([]float32, n)
	for i, v := range d.bf16At(p, n) {
		f[i] = bf16ToF32(v)
	}
	return f
}

// narrow stores v into the bf16 h, rounded to nearest even.
func narrow(h []uint16, v []float32) {
	for i, x := range v {
		h[i] = bf16FromF64(float64(x))
	}
}

// gelu32 and geluGrad32 apply the CPU engine's GELU (hostloops: the tanh
// approximation) and its derivative to float64 values, in float32.
func gelu32(v []float64) {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	hostloops.GELU(f, append([]float32(nil), f...))
	for i, x := range f {
		v[i] = float64(x)
	}
}

// geluGrad32 multiplies each acc[i] by gelu'(pre[i]) (float32, hostloops).
func geluGrad32(acc, pre []float64) {
	dy, x := make([]float32, len(acc)), make([]float32, len(acc))
	for i := range acc {
		dy[i], x[i] = float32(acc[i]), float32(pre[i])
	}
	hostloops.GELUBackward(dy, dy, x)
	for i, v := range dy {
		acc[i] = float64(v)
	}
}
