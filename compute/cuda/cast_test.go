package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
)

// The bf16 casts, bit for bit, eager and replayed from a graph: fp32 to
// bf16 against an independent round to nearest even (ties both ways,
// subnormals, overflow to infinity, NaN to 0x7fc0) and every one of the
// 65536 bf16 values back to fp32 exactly.
func TestCastBF16GPU(t *testing.T) { testCastBF16(t, gpuEngine(t)) }
func TestCastBF16Emulated(t *testing.T) {
	testCastBF16(t, cudatest.NewEmulated(cuda.Options{}))
}

// refBF16 rounds f to the nearest bf16, ties to the even one, by comparing
// the distances to the two neighbours in float64 (2^128 standing for the
// infinity past the largest finite bf16).
func refBF16(f float32) uint16 {
	if f != f {
		return 0x7fc0
	}
	u := math.Float32bits(f)
	lo := u &^ 0xffff // toward zero
	if lo == u {
		return uint16(u >> 16)
	}
	hi := lo + 0x10000 // away from zero
	x := math.Abs(float64(f))
	dl := x - math.Abs(float64(math.Float32frombits(lo)))
	up := math.Abs(float64(math.Float32frombits(hi)))
	if hi&0x7fffffff == 0x7f800000 {
		up = 0x1p128
	}
	dh := up - x
	if dh < dl || (dh == dl && lo&0x10000 != 0) {
		return uint16(hi >> 16)
	}
	return uint16(lo >> 16)
}

func testCastBF16(t *testing.T, e *cuda.Engine) {
	r := rand.New(rand.NewPCG(16, 8))
	src := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32,
		math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), // ties: to even down, to even up
		math.Float32frombits(0x7f7f8000), math.Float32frombits(0x7f7f7fff), // a tie to infinity; just below it
		math.Float32frombits(0x00018000), math.Float32frombits(0x807fffff), // subnormals
		float32(math.NaN()), math.Float32frombits(0xff800001), math.Float32frombits(0x7fbfffff)}
	for len(src) < 5003 { // odd: the bf16 buffer ends inside a word
		if len(src)%2 == 0 {
			src = append(src, math.Float32frombits(r.Uint32()))
		} else {
			src = append(src, float32(r.NormFloat64()))
		}
	}
	n := len(src)
	// Every bf16 value, two to a word (element 2i is word i's low half).
	words := make([]float32, 1<<15)
	for i := range words {
		words[i] = math.Float32frombits(uint32(2*i) | uint32(2*i+1)<<16)
	}
	for _, graph := range []bool{false, true} {
		x, back := e.Alloc(n), e.Alloc(n)
		e.SetTensor(x, src)
		half := e.Alloc((n + 1) / 2).(*cuda.Tensor)
		all, up := e.Alloc(len(words)).(*cuda.Tensor), e.Alloc(2*len(words))
		e.SetTensor(all, words)
		run := func() {
			e.CastToBF16(half.DevicePtr(), x)
			e.CastFromBF16(back, half.DevicePtr())
			e.CastFromBF16(up, all.DevicePtr())
		}
		runOn(t, e, graph, run)
		got := readBits(t, e, back)
		for i, f := range src {
			if want := uint32(refBF16(f)) << 16; got[i] != want {
				t.Fatalf("graph %v: %#08x (%v) cast to bf16 and back: %#08x, want %#08x", graph, math.Float32bits(f), f, got[i], want)
			}
		}
		for h, b := range readBits(t, e, up) {
			if b != uint32(h)<<16 {
				t.Fatalf("graph %v: bf16 %#04x cast to fp32: %#08x, want %#08x", graph, h, b, uint32(h)<<16)
			}
		}
	}
	expectPanic(t, "CastToBF16 at an odd address", func() { e.CastToBF16(1, e.Alloc(4)) })
	x := e.Alloc(4).(*cuda.Tensor)
	expectPanic(t, "CastFromBF16 over its own tensor", func() { e.CastFromBF16(x, x.DevicePtr()+2) })
}

// readBits is t's values as bits.
func readBits(t *testing.T, e *cuda.Engine, x compute.Tensor) []uint32 {
	t.Helper()
	v := make([]float32, x.Size())
	e.ReadTensor(v, x)
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	b := make([]uint32, len(v))
	for i, f := range v {
		b[i] = math.Float32bits(f)
	}
	return b
}

// expectPanic fails t unless f panics.
func expectPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}
