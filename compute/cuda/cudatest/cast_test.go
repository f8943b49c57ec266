package cudatest

import (
	"math"
	"testing"
)

// TestCastBF16 is sdc_cast_bf16 (the bf16 copy of the masters, a bf16
// gradient allreduce): round to nearest even, NaN to 0x7fc0, infinity on
// overflow, exactly n elements, and the library's argument checks.
func TestCastBF16(t *testing.T) {
	g := newGPU(t)
	in := []float32{1, 1 + 1.0/256, 1 + 3.0/256, -3.0e-3, float32(math.NaN()), math.MaxFloat32, 7}
	want := []uint16{0x3f80, 0x3f80, 0x3f82, 0xbb45, 0x7fc0, 0x7f80, 0xbeef}
	pin, pout := g.f32(in), g.alloc(2*len(in))
	g.setBF(pout, []float64{0, 0, 0, 0, 0, 0, float64(math.Float32frombits(0xbeef << 16))})
	g.ok(g.d.CastBF16(pout, pin, len(in)-1)) // an odd count; the last one stays
	got := g.bits(pout, len(in))
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("cast(%g) = %#x, want %#x", in[i], got[i], want[i])
		}
	}
	g.ok(g.d.CastBF16(0, 0, 0))
	wantArg(t, "n<0", g.d.CastBF16(pout, pin, -1))
	wantArg(t, "NULL", g.d.CastBF16(0, pin, 1))
	wantArg(t, "misaligned src", g.d.CastBF16(pout, pin+2, 1))
}
