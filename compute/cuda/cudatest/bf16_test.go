package cudatest

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/symddp/symddp/internal/cudalib"
)

// The references of the bf16 kernels' tests are written apart from the emulation's loops (other
// formulas where there are any: E[x²]-mean², finite differences, the
// attention in matrices, D as rowsum(P∘dP)) and in float64; a value the
// kernels store in bf16 must lie within its rounding (2^-9 relative, taken
// as 2^-8) of the reference unless said otherwise.

const bf16Tol = 1.0 / 256

type gpu struct {
	t   *testing.T
	d   *Device
	rng *rand.Rand
}

func newGPU(t *testing.T) *gpu {
	t.Helper()
	d := NewDevice()
	return &gpu{t: t, d: d, rng: rand.New(rand.NewPCG(7, uint64(len(t.Name()))))}
}

func (g *gpu) alloc(bytes int) uintptr {
	p, err := g.d.DevAlloc(bytes)
	if err != nil {
		g.t.Fatal(err)
	}
	return p
}

// bfExact truncates x to a value bf16 holds exactly (inputs need no rounding).
func bfExact(x float64) float64 {
	return float64(math.Float32frombits(math.Float32bits(float32(x)) &^ 0xffff))
}

// randBF n bf16-exact values of sd around mean.
func (g *gpu) randBF(n int, sd, mean float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = bfExact(mean + sd*g.rng.NormFloat64())
	}
	return v
}

func (g *gpu) randF32(n int, sd float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(sd * g.rng.NormFloat64())
	}
	return v
}

func (g *gpu) up(p uintptr, src unsafe.Pointer, bytes int) {
	if err := g.d.HtoD(false, p, src, bytes); err != nil {
		g.t.Fatal(err)
	}
}

// bf uploads bf16-exact values (the upper halves of their float32 bits).
func (g *gpu) bf(v []float64) uintptr {
	p := g.alloc(2 * len(v))
	g.setBF(p, v)
	return p
}

func (g *gpu) setBF(p uintptr, v []float64) {
	h := make([]uint16, len(v)+1)
	for i, x := range v {
		u := math.Float32bits(float32(x))
		if u&0xffff != 0 {
			g.t.Fatalf("input %v is not a bf16 value", x)
		}
		h[i] = uint16(u >> 16)
	}
	g.up(p, unsafe.Pointer(&h[0]), 2*len(v))
}

func (g *gpu) f32(v []float32) uintptr {
	p := g.alloc(4 * len(v))
	g.up(p, unsafe.Pointer(&v[0]), 4*len(v))
	return p
}

func (g *gpu) i32(v []int32) uintptr {
	p := g.alloc(4 * len(v))
	g.up(p, unsafe.Pointer(&v[0]), 4*len(v))
	return p
}

func (g *gpu) bits(p uintptr, n int) []uint16 {
	h := make([]uint16, n+1)
	if err := g.d.DtoH(false, unsafe.Pointer(&h[0]), p, 2*n); err != nil {
		g.t.Fatal(err)
	}
	return h[:n]
}

func (g *gpu) readBF(p uintptr, n int) []float64 {
	f := make([]float64, n)
	for i, h := range g.bits(p, n) {
		f[i] = float64(math.Float32frombits(uint32(h) << 16))
	}
	return f
}

func (g *gpu) readF32(p uintptr, n int) []float64 {
	h := make([]float32, n)
	if err := g.d.DtoH(false, unsafe.Pointer(&h[0]), p, 4*n); err != nil {
		g.t.Fatal(err)
	}
	f := make([]float64, n)
	for i, v := range h {
		f[i] = float64(v)
	}
	return f
}

func (g *gpu) ok(err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}

// near: |got - ref| <= atol*rms(ref) + rtol*|ref| element by element.
func near(t *testing.T, name string, got, ref []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(ref) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(ref))
	}
	var ss float64
	for _, r := range ref {
		ss += r * r
	}
	rms := math.Sqrt(ss / float64(max(len(ref), 1)))
	bad := 0
	for i := range ref {
		if !(math.Abs(got[i]-ref[i]) <= atol*rms+rtol*math.Abs(ref[i])) {
			if bad < 3 {
				t.Errorf("%s[%d] = %.8g, want %.8g", name, i, got[i], ref[i])
			}
			bad++
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d of %d values off", name, bad, len(ref))
	}
}

func f32s(v []float32) []float64 {
	f := make([]float64, len(v))
	for i, x := range v {
		f[i] = float64(x)
	}
	return f
}

func wantArg(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, cudalib.ErrArgument) {
		t.Errorf("%s: err %v, want a bad argument (cudalib.ErrArgument)", what, err)
	}
}

func TestBF16Rounding(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80},
		{1 + 1.0/256, 0x3f80},             // tie: to even (down)
		{1 + 3.0/256, 0x3f82},             // tie: to even (up)
		{1 + 1.0/256 + 1.0/65536, 0x3f81}, // above the tie
		{-2.5, 0xc020},
		{float32(math.Inf(1)), 0x7f80},
		{float32(math.Inf(-1)), 0xff80},
		{math.MaxFloat32, 0x7f80},
		{float32(math.Copysign(0, -1)), 0x8000},
		{float32(math.NaN()), 0x7fc0},
	} {
		if got := bf16FromF32(c.f); got != c.want {
			t.Errorf("bf16FromF32(%g) = %#x, want %#x", c.f, got, c.want)
		}
	}
	// float64: one rounding, not two (float32 first would make a false tie).
	for _, c := range []struct {
		x    float64
		want uint16
	}{
		{1 + 1.0/256 + 0x1p-40, 0x3f81},
		{-(1 + 1.0/256 + 0x1p-40), 0xbf81},
		{1 + 1.0/256, 0x3f80},
		{1e300, 0x7f80},
		{1e-300, 0},
		{math.NaN(), 0x7fc0},
		{math.Inf(-1), 0xff80},
	} {
		if got := bf16FromF64(c.x); got != c.want {
			t.Errorf("bf16FromF64(%g) = %#x, want %#x", c.x, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		x := r.NormFloat64() * math.Pow(2, float64(r.IntN(60)-30))
		h := bf16FromF64(x)
		lo, hi := bf16ToF64(h), 0.0
		// the neighbour on x's side
		if math.Abs(lo) < math.Abs(x) {
			hi = bf16ToF64(h + 1)
		} else {
			hi = bf16ToF64(h - 1)
		}
		if math.Abs(x-lo) > math.Abs(x-hi) {
			t.Fatalf("bf16FromF64(%v) = %v, %v is nearer", x, lo, hi)
		}
	}
}

// dot is the float64 dot product of a and b.
func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// A captured sequence (layernorm, GEMM with an epilogue, AdamW) does
// nothing until launched, then what the eager calls do, reading the device
// memory of the replay: new inputs and new hyperparameters take effect.
func TestGPTCaptureReplay(t *testing.T) {
	const n, c, oc = 4, 16, 8
	type run struct {
		g                                    *gpu
		px, pw, pb, pout, pw2, py, pbias, ph uintptr
		pp, pg, pm, pv                       uintptr
		plan                                 uint64
	}
	setup := func() *run {
		g := newGPU(t)
		g.rng = rand.New(rand.NewPCG(3, 4)) // the same data for both
		r := &run{g: g}
		r.px, r.pw, r.pb = g.bf(g.randBF(n*c, 1, 0)), g.bf(g.randBF(c, 0.2, 1)), g.bf(g.randBF(c, 0.2, 0))
		r.pout, r.pw2, r.py, r.pbias = g.alloc(2*n*c), g.bf(g.randBF(oc*c, 0.3, 0)), g.alloc(2*n*oc), g.bf(g.randBF(oc, 1, 0))
		r.pp, r.pg, r.pm, r.pv = g.f32(g.randF32(oc, 1)), g.f32(g.randF32(oc, 1)), g.alloc(4*oc), g.alloc(4*oc)
		r.ph = g.hyper(hyper{lr: 1e-2, beta1: 0.9, beta2: 0.99, eps: 1e-8, wd: 0.1, gradScale: 1, step: 1})
		var err error
		r.plan, err = g.d.BF16GemmCreate(cudalib.GemmDesc{M: n, N: oc, K: c, TransB: true, Batch: 1, CType: cudalib.BFloat16, BiasType: cudalib.BFloat16, Epilogue: cudalib.BF16EpiGELUBias})
		g.ok(err)
		return r
	}
	step := func(r *run) {
		r.g.ok(r.g.d.LayerNorm(cudalib.BFloat16, r.pout, 0, 0, r.px, r.pw, r.pb, n, c, lnEps))
		r.g.ok(r.g.d.BF16GemmRun(r.plan, r.py, r.pout, r.pw2, r.pbias, 0, 0))
		r.g.ok(r.g.d.AdamWBF16(r.pp, 0, r.pg, r.pm, r.pv, 0, 0, oc, r.ph))
	}
	change := func(r *run) { // new input and a second step with another lr
		x := make([]float64, n*c)
		for i := range x {
			x[i] = float64(i%7) - 3
		}
		r.g.setBF(r.px, x)
		h := hyper{lr: 3e-2, beta1: 0.9, beta2: 0.99, eps: 1e-8, wd: 0.1, gradScale: 1, step: 2}
		r.g.up(r.ph, unsafe.Pointer(&h), int(unsafe.Sizeof(h)))
	}
	state := func(r *run) []float64 {
		return append(append(r.g.readBF(r.py, n*oc), r.g.readF32(r.pp, oc)...), r.g.readF32(r.pm, oc)...)
	}
	eager, graph := setup(), setup()
	step(eager)
	g := graph.g
	g.ok(g.d.CaptureBegin())
	step(graph)
	exec, err := g.d.CaptureEnd()
	g.ok(err)
	if got := state(graph); got[0] != 0 {
		t.Fatal("a captured launch ran before the graph was launched")
	}
	g.ok(g.d.GraphLaunch(exec, cudalib.StepValues{}))
	near(t, "first replay", state(graph), state(eager), 0, 0)
	change(eager)
	step(eager)
	change(graph)
	g.ok(g.d.GraphLaunch(exec, cudalib.StepValues{}))
	near(t, "second replay", state(graph), state(eager), 0, 0)
}
