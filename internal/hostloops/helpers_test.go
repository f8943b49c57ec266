package hostloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// specialElems are the values that the element-wise loops' inputs mix in:
// the classes of float32 where a careless loop (or a compiler's rewrite)
// gives other bits.
var specialElems = []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)),
	float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0x7fc12345), // a NaN with a payload
	math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-39, -1e-39, math.MaxFloat32, -math.MaxFloat32,
	1e-20, 3e38}

// specialRows are the values that the row loops' inputs mix in: zeros,
// subnormals, and the edges of exp32's clamp.
var specialRows = []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-39, -1e-39, 1e-20, -1e-20,
	30, -30, 87.5, -87.5, 88, -88, 89, -89, 1e4, -1e4}

// randFrom returns n normal values of standard deviation scale, a quarter
// of them small (1e-3) and, with special, an eighth drawn from special.
func randFrom(r *rand.Rand, n int, special []float32, scale float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		switch {
		case special != nil && r.IntN(8) == 0:
			s[i] = special[r.IntN(len(special))]
		case r.IntN(4) == 0:
			s[i] = float32(r.NormFloat64() * 1e-3)
		default:
			s[i] = float32(r.NormFloat64() * scale)
		}
	}
	return s
}

// randElems is an element-wise loop's input, with specialElems when sp.
func randElems(r *rand.Rand, n int, sp bool) []float32 {
	if sp {
		return randFrom(r, n, specialElems, 1)
	}
	return randFrom(r, n, nil, 1)
}

// randRows is a row loop's input, with specialRows when sp.
func randRows(r *rand.Rand, n int, sp bool, scale float64) []float32 {
	if sp {
		return randFrom(r, n, specialRows, scale)
	}
	return randFrom(r, n, nil, scale)
}

func bitsEqual(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != got[i] && want[i] != want[i] {
			continue // both NaN: the payload and sign may differ (see the package doc)
		}
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d of %d: C %v (%#08x), Go %v (%#08x)", what, i, len(want),
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

func clone(s []float32) []float32 { return append([]float32(nil), s...) }

// forLevels runs f with the C loops of each instruction set (the best one
// present, then the baseline one), after skipping without cgo.
func forLevels(t *testing.T, f func(t *testing.T)) {
	if !cAvailable {
		t.Skip("built without cgo: only the Go loops exist")
	}
	t.Run(cLevel(), f)
	cUseBase(true)
	defer cUseBase(false)
	t.Run("baseline", f)
}

// lengths covers the element-wise loops' vector tails and main bodies;
// offsets (0 to 2) move the slices off their allocation's alignment.
var lengths = []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 256, 257, 1000, 4099}

// widths covers the row loops' eight-lane bodies and their tails.
var widths = []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65, 127, 128, 129, 768, 1000}

// forCases runs f at each instruction set for every length, offset and
// choice of special values, with the same random numbers at each.
func forCases(t *testing.T, f func(t *testing.T, r *rand.Rand, n, off int, sp bool)) {
	forLevels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, n := range lengths {
			for off := range 3 {
				for _, sp := range []bool{false, true} {
					f(t, r, n, off, sp)
				}
			}
		}
	})
}

// two returns two copies of a random slice of n elements starting off
// elements into their backing arrays.
func two(r *rand.Rand, n, off int, sp bool) (a, b []float32) {
	s := randElems(r, n+off, sp)
	a = append([]float32(nil), s...)[off:]
	b = append([]float32(nil), s...)[off:]
	return a, b
}

// benchLoop times the Go loop g and the C loop c (where built) over n
// elements of x and y.
func benchLoop(b *testing.B, n int, c, g func([]float32, []float32)) {
	r := rand.New(rand.NewPCG(3, 4))
	x, y := randElems(r, n, false), randElems(r, n, false)
	for _, v := range []struct {
		name string
		f    func([]float32, []float32)
	}{{"go", g}, {"c", c}} {
		if v.name == "c" && !cAvailable {
			continue
		}
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for b.Loop() {
				v.f(x, y)
			}
		})
	}
}

func needC(b *testing.B) {
	if !cAvailable {
		b.Skip("built without cgo")
	}
}
