package hostloops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestSoftmaxXentRow(t *testing.T) {
	x := []float32{1, 3, 2, 3}
	g := make([]float32, len(x))
	loss, hit := SoftmaxXentRow(x, g, 2, 0.5)
	sum := math.Exp(-2) + 1 + math.Exp(-1) + 1
	if want := math.Log(sum) + 1; math.Abs(loss-want) > 1e-12 {
		t.Errorf("loss %v, want %v", loss, want)
	}
	if hit {
		t.Errorf("the label 2 is not the arg-max (1, the first of two 3s) but counts as a hit")
	}
	for j, v := range x {
		want := 0.5 * math.Exp(float64(v)-3) / sum
		if j == 2 {
			want -= 0.5
		}
		if math.Abs(float64(g[j])-want) > 1e-7 {
			t.Errorf("g[%d] = %v, want %v", j, g[j], want)
		}
	}
	if _, hit := SoftmaxXentRow(x, g, 1, 1); !hit {
		t.Errorf("the label 1 (the first maximum) is not a hit")
	}
}

func TestSumSquares(t *testing.T) {
	if got := SumSquares([]float32{1, -2, 3, 0.5}); got != 14.25 {
		t.Errorf("SumSquares = %v, want 14.25", got)
	}
}

// TestSoftmaxXentRowBits: the C path (xent.c) gives the Go loop's bits —
// gradient, loss and hit — at every row length up to 70 and at the
// vocabularies of the models, over rows of wide and narrow spread with
// the special values mixed in, and over rows that fall back to the Go
// loop (an element 800 below the maximum, NaN, infinities).
func TestSoftmaxXentRowBits(t *testing.T) {
	if !useC {
		t.Skip("the C loops are off")
	}
	r := rand.New(rand.NewPCG(7, 39))
	lengths := []int{256, 257, 50257, 50304}
	for n := 1; n <= 70; n++ {
		lengths = append(lengths, n)
	}
	fast := 0
	for _, n := range lengths {
		for rep := 0; rep < 6; rep++ {
			scale := []float64{1, 4, 30, 300}[rep%4]
			x := randRows(r, n, rep >= 2, scale)
			switch rep {
			case 4: // an element far below the rest: Go's subnormal path
				x[r.IntN(n)] = -800
			case 5:
				x[r.IntN(n)] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[r.IntN(3)]
			}
			y := r.IntN(n)
			s := float32(1 / (1 + r.Float64()*100))
			want, got := make([]float32, n), make([]float32, n)
			wl, wh := goSoftmaxXentRow(x, want, y, s)
			gl, gh := SoftmaxXentRow(x, got, y, s)
			bitsEqual(t, "SoftmaxXentRow gradient", got, want)
			if math.Float64bits(gl) != math.Float64bits(wl) && !(math.IsNaN(gl) && math.IsNaN(wl)) || gh != wh {
				t.Fatalf("n %d rep %d: loss %v hit %v, want %v %v", n, rep, gl, gh, wl, wh)
			}
			_, _, _, ok := cXentRow(x, make([]float32, n), s)
			if ok {
				fast++
			}
			if rep < 2 && !ok && cLevel() == "avx2" {
				t.Fatalf("n %d rep %d: a row within 708 of its maximum went to the Go loop", n, rep)
			}
		}
	}
	t.Logf("the C path took %d of %d rows", fast, 6*len(lengths))
}

// BenchmarkSoftmaxXentRow: one row of the byte-level models' vocabulary
// (256) and of GPT-2's padded one (50304), the C path against the Go loop.
func BenchmarkSoftmaxXentRow(b *testing.B) {
	for _, n := range []int{256, 50304} {
		x := randRows(rand.New(rand.NewPCG(1, uint64(n))), n, false, 3)
		g := make([]float32, n)
		for _, impl := range []struct {
			name string
			f    func(x, g []float32, y int, scale float32) (float64, bool)
		}{{"go", goSoftmaxXentRow}, {"best", SoftmaxXentRow}} {
			b.Run(fmt.Sprintf("n=%d/%s", n, impl.name), func(b *testing.B) {
				b.SetBytes(int64(4 * n))
				for b.Loop() {
					impl.f(x, g, 3, 0.5)
				}
			})
		}
	}
}
