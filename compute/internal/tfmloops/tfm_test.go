package tfmloops

import (
	"math"
	"math/rand/v2"
	"testing"
)

// special values that inputs mix in: where a careless loop (or a
// compiler's rewrite) gives other bits.
var special = []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1e-39, -1e-39, 1e-20, -1e-20,
	30, -30, 87.5, -87.5, 88, -88, 89, -89, 1e4, -1e4}

func randSlice(r *rand.Rand, n int, withSpecial bool, scale float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		switch {
		case withSpecial && r.IntN(8) == 0:
			s[i] = special[r.IntN(len(special))]
		case r.IntN(4) == 0:
			s[i] = float32(r.NormFloat64() * 1e-3)
		default:
			s[i] = float32(r.NormFloat64() * scale)
		}
	}
	return s
}

func bitsEqual(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if got[i] != got[i] && want[i] != want[i] {
			continue // both NaN: sign and payload may differ (see the package doc)
		}
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d of %d: C %v (%#08x), Go %v (%#08x)", what, i, len(want),
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

func clone(s []float32) []float32 { return append([]float32(nil), s...) }

// widths covers the eight-lane bodies and their tails.
var widths = []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65, 127, 128, 129, 768, 1000}

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

func TestExp32(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := float32(-87 + 175*float64(i)/2_000_000)
		got, want := float64(exp32(x)), math.Exp(float64(x))
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
	}
	t.Logf("exp32's worst relative error on [-87, 88]: %.3g", worst)
	// float32's epsilon is 1.19e-7: a few ulps.
	if worst > 4e-7 {
		t.Errorf("exp32's worst relative error on [-87, 88] is %.3g, want below 4e-7", worst)
	}
	for _, c := range []struct{ x, want float32 }{{0, 1}, {float32(math.Inf(1)), exp32(88)},
		{float32(math.Inf(-1)), 0}, {-100, 0}} {
		if got := exp32(c.x); got != c.want {
			t.Errorf("exp32(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if v := exp32(float32(math.NaN())); v == v {
		t.Errorf("exp32(NaN) = %v, want NaN", v)
	}
	if math.IsInf(float64(exp32(88)), 0) {
		t.Errorf("exp32(88) overflows")
	}
}

func TestLayerNormMatchesGo(t *testing.T) { forLevels(t, testLayerNormMatchesGo) }

func testLayerNormMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range widths {
		for _, sp := range []bool{false, true} {
			rows := 1 + r.IntN(5)
			x := randSlice(r, rows*c, sp, 3)
			w, b := randSlice(r, c, sp, 1), randSlice(r, c, sp, 1)
			yc, yg := make([]float32, rows*c), make([]float32, rows*c)
			mc, mg, rc, rg := make([]float32, rows), make([]float32, rows), make([]float32, rows), make([]float32, rows)
			cLayerNorm(yc, mc, rc, x, w, b, rows, c, 1e-5)
			goLayerNorm(yg, mg, rg, x, w, b, rows, c, 1e-5)
			bitsEqual(t, "LayerNorm y", yc, yg)
			bitsEqual(t, "LayerNorm mean", mc, mg)
			bitsEqual(t, "LayerNorm rstd", rc, rg)
			dy := randSlice(r, rows*c, sp, 1)
			for _, add := range []bool{false, true} {
				dxc := randSlice(r, rows*c, false, 1)
				dxg := clone(dxc)
				dwc, dbc := randSlice(r, c, false, 1), randSlice(r, c, false, 1)
				dwg, dbg := clone(dwc), clone(dbc)
				cLayerNormBackward(dxc, dwc, dbc, dy, x, w, mc, rc, rows, c, add)
				goLayerNormBackward(dxg, dwg, dbg, dy, x, w, mg, rg, rows, c, add)
				bitsEqual(t, "LayerNormBackward dx", dxc, dxg)
				bitsEqual(t, "LayerNormBackward dw", dwc, dwg)
				bitsEqual(t, "LayerNormBackward db", dbc, dbg)
			}
		}
	}
}

func TestGELUMatchesGo(t *testing.T) { forLevels(t, testGELUMatchesGo) }

func testGELUMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range append(widths, 4099) {
		for _, sp := range []bool{false, true} {
			x := randSlice(r, n, sp, 3)
			x = append(x, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)))
			yc, yg := make([]float32, len(x)), make([]float32, len(x))
			cGELU(yc, x)
			goGELU(yg, x)
			bitsEqual(t, "GELU", yc, yg)
			dy := randSlice(r, len(x), sp, 1)
			dc, dg := make([]float32, len(x)), make([]float32, len(x))
			cGELUBackward(dc, dy, x)
			goGELUBackward(dg, dy, x)
			bitsEqual(t, "GELUBackward", dc, dg)
			// In place over dy.
			d2 := clone(dy)
			cGELUBackward(d2, d2, x)
			bitsEqual(t, "GELUBackward in place", d2, dg)
		}
	}
}

func TestSoftmaxCausalMatchesGo(t *testing.T) { forLevels(t, testSoftmaxCausalMatchesGo) }

func testSoftmaxCausalMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, width := range widths {
		for _, sp := range []bool{false, true} {
			r0 := r.IntN(width)
			rows := 1 + r.IntN(width-r0)
			ld := width + r.IntN(3)
			p := randSlice(r, rows*ld, sp, 4)
			pc, pg := clone(p), clone(p)
			cSoftmaxCausal(pc, ld, r0, rows, width)
			goSoftmaxCausal(pg, ld, r0, rows, width)
			bitsEqual(t, "SoftmaxCausal", pc, pg)
			for i := 0; i < rows; i++ {
				for j := r0 + i + 1; j < width; j++ {
					if pg[i*ld+j] != 0 {
						t.Fatalf("SoftmaxCausal: row %d (query %d) has %v at key %d", i, r0+i, pg[i*ld+j], j)
					}
				}
			}
			dp := randSlice(r, rows*ld, sp, 1)
			dc, dg := clone(dp), clone(dp)
			cSoftmaxCausalBackward(dc, pg, ld, r0, rows, width)
			goSoftmaxCausalBackward(dg, pg, ld, r0, rows, width)
			bitsEqual(t, "SoftmaxCausalBackward", dc, dg)
		}
	}
}

func TestRowsMatchGo(t *testing.T) { forLevels(t, testRowsMatchGo) }

func testRowsMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range widths {
		const v, n = 9, 20
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(r.IntN(v+1)) - 1
		}
		table, src := randSlice(r, v*c, true, 1), randSlice(r, n*c, true, 1)
		for _, acc := range []bool{false, true} {
			dc := randSlice(r, n*c, true, 1)
			dg := clone(dc)
			cGatherRows(dc, table, idx, c, acc)
			goGatherRows(dg, table, idx, c, acc)
			bitsEqual(t, "GatherRows", dc, dg)
		}
		tc, tg := clone(table), clone(table)
		cScatterAddRows(tc, src, idx, c)
		goScatterAddRows(tg, src, idx, c)
		bitsEqual(t, "ScatterAddRows", tc, tg)
	}
}

func TestBadIndexChangesNothing(t *testing.T) {
	table, rows := []float32{1, 2, 3, 4}, []float32{5, 6, 7, 8}
	for _, c := range []struct {
		idx  []int32
		want int
	}{{[]int32{0, 2}, 1}, {[]int32{-2, 0}, 0}} {
		if bad := GatherRows(rows, table, c.idx, 2, false); bad != c.want {
			t.Errorf("GatherRows(%v) = %d, want %d", c.idx, bad, c.want)
		}
		if bad := ScatterAddRows(table, rows, c.idx, 2); bad != c.want {
			t.Errorf("ScatterAddRows(%v) = %d, want %d", c.idx, bad, c.want)
		}
		if table[0] != 1 || table[3] != 4 || rows[0] != 5 || rows[3] != 8 {
			t.Fatalf("a call with a bad index %v wrote: table %v, rows %v", c.idx, table, rows)
		}
	}
}

func TestShortSlicesPanic(t *testing.T) {
	s := func(n int) []float32 { return make([]float32, n) }
	for name, f := range map[string]func(){
		"LayerNorm":         func() { LayerNorm(s(20), s(2), s(2), s(19), s(10), s(10), 2, 10, 1e-5) },
		"LayerNormRows":     func() { LayerNorm(s(20), s(1), s(2), s(20), s(10), s(10), 2, 10, 1e-5) },
		"LayerNormBackward": func() { LayerNormBackward(s(20), s(10), s(9), s(20), s(20), s(10), s(2), s(2), 2, 10, false) },
		"GELU":              func() { GELU(s(9), s(10)) },
		"GELUBackward":      func() { GELUBackward(s(10), s(9), s(10)) },
		"SoftmaxCausal":     func() { SoftmaxCausal(s(15), 8, 0, 2, 8) },
		"SoftmaxCausalRows": func() { SoftmaxCausal(s(64), 8, 5, 4, 8) },
		"SoftmaxBackward":   func() { SoftmaxCausalBackward(s(16), s(15), 8, 0, 2, 8) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with a short slice or bad rows did not panic", name)
				}
			}()
			f()
		}()
	}
}
