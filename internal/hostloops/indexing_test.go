package hostloops

import (
	"math/rand/v2"
	"testing"
)

func TestGatherScatterMatchGo(t *testing.T) { forLevels(t, testGatherScatterMatchGo) }

func testGatherScatterMatchGo(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range widths {
		const v, n = 9, 20
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(r.IntN(v+1)) - 1
		}
		table, src := randRows(r, v*c, true, 1), randRows(r, n*c, true, 1)
		for _, acc := range []bool{false, true} {
			dc := randRows(r, n*c, true, 1)
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
