package cuda

import (
	"fmt"

	"github.com/symddp/symddp/compute"
)

// CastToBF16 writes src's elements rounded to bf16 (to nearest, ties to
// even; any NaN becomes the quiet NaN 0x7fc0) at dst, the device address of
// src.Size() bf16 values (2 bytes each, 2-byte aligned), in one kernel
// (sdc_cast_bf16): a bf16 gradient allreduce's way down. It can be
// captured.
func (e *Engine) CastToBF16(dst uintptr, src compute.Tensor) {
	const op = "CastToBF16"
	sd := e.tensorOf(op, src)
	checkBF16(op, dst, sd)
	e.fail(op, e.dev.CastBF16(dst, sd.ptr, sd.size))
}

// CastFromBF16 sets dst's elements to the dst.Size() bf16 values at device
// address src, exactly (sdc_cast_f32): the way back up. It can be
// captured.
func (e *Engine) CastFromBF16(dst compute.Tensor, src uintptr) {
	const op = "CastFromBF16"
	dd := e.tensorOf(op, dst)
	checkBF16(op, src, dd)
	e.fail(op, e.dev.CastF32(dd.ptr, src, dd.size))
}

// checkBF16 checks the bf16 side of a cast beside the fp32 tensor t: a
// 2-byte aligned address, whose 2·t.Size() bytes do not overlap t.
func checkBF16(op string, p uintptr, t *Tensor) {
	if p == 0 || p%2 != 0 || (p < t.ptr+uintptr(t.bytes()) && t.ptr < p+2*uintptr(t.size)) {
		panicBF16(op, p, t)
	}
}

//go:noinline
func panicBF16(op string, p uintptr, t *Tensor) {
	panic(fmt.Sprintf("cuda: %s: bf16 address %#x for a tensor of shape %v at %#x: want it 2-byte aligned and apart from the tensor", op, p, []int(t.shape), t.ptr))
}
