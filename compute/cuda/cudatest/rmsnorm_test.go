package cudatest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/symddp/symddp/internal/hostloops"
)

// The emulation of the RMSNorm kernels in L lanes, at L = 8, is the CPU
// engine's loop bit for bit (hostloops' dot8 and its tail are the eight
// lanes' sums added pairwise, then the tail in order), so the lanes' tree
// of sumLanes is the fp32 kernels' sdc_sum8; the bf16 kernels run the same
// code at L = 32.
func TestRMSNormLanesOfEightAreHostloops(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 7))
	for _, c := range []int{1, 5, 8, 13, 40, 771} {
		const rows = 3
		x, w, dy, d0 := make([]float32, rows*c), make([]float32, c), make([]float32, rows*c), make([]float32, rows*c)
		for _, v := range [][]float32{x, w, dy, d0} {
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
		}
		y, rstd := make([]float32, rows*c), make([]float32, rows)
		hostloops.RMSNorm(y, rstd, x, w, rows, c, 1e-5)
		for _, add := range []bool{false, true} {
			dx, dw := append([]float32(nil), d0...), make([]float32, c)
			hostloops.RMSNormBackward(dx, dw, dy, x, w, rstd, rows, c, add)
			got, gdx := make([]float32, c), make([]float32, c)
			for i := range rows {
				o := i * c
				rs := rmsNormRow(got, x[o:o+c], w, 8, 1e-5)
				if math.Float32bits(rs) != math.Float32bits(rstd[i]) {
					t.Fatalf("width %d row %d: rstd %v, hostloops' %v", c, i, rs, rstd[i])
				}
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(y[o+j]) {
						t.Fatalf("width %d row %d: y[%d] %v, hostloops' %v", c, i, j, got[j], y[o+j])
					}
				}
				rmsNormDXRow(gdx, d0[o:o+c], dy[o:o+c], x[o:o+c], w, rstd[i], 8, add)
				for j := range gdx {
					if math.Float32bits(gdx[j]) != math.Float32bits(dx[o+j]) {
						t.Fatalf("width %d row %d addDX %v: dx[%d] %v, hostloops' %v", c, i, add, j, gdx[j], dx[o+j])
					}
				}
			}
		}
	}
}

// sumLanes adds neighbours first: for 32 lanes of ones but lane 0 = 2^24,
// the pairwise tree loses only lane 1's one (2^24+1 rounds to even) and
// keeps the other 30, added up in pairs before they meet 2^24, where a left
// fold would lose them all.
func TestSumLanesTree(t *testing.T) {
	p := make([]float32, 32)
	for i := range p {
		p[i] = 1
	}
	p[0] = 1 << 24
	if got, want := sumLanes(p, nil), float32(1<<24+30); got != want {
		t.Fatalf("sumLanes = %v, want %v", got, want)
	}
	if got, want := sumLanes([]float32{1, 2, 3, 4, 5, 6, 7, 8}, []float32{0.5, 0.25}), float32(36.75); got != want {
		t.Fatalf("sumLanes with a tail = %v, want %v", got, want)
	}
}
