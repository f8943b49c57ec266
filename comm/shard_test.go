package comm

import "testing"

func TestShardPartitionsOnCacheLines(t *testing.T) {
	for _, npes := range []int{1, 2, 3, 4, 7, 8} {
		for _, c := range []struct{ off, n int }{{0, 0}, {0, 1}, {3, 7}, {5, 1000}, {16, 1 << 20}, {1, 1<<20 + 3}} {
			next := c.off
			for p := 0; p < npes; p++ {
				lo, hi := Shard(c.off, c.n, npes, p)
				if lo != next || hi < lo {
					t.Fatalf("npes=%d off=%d n=%d: PE %d owns [%d, %d), want it to start at %d", npes, c.off, c.n, p, lo, hi, next)
				}
				if p > 0 && lo != c.off+c.n && lo%ShardAlign != 0 {
					t.Fatalf("npes=%d off=%d n=%d: PE %d starts at %d, not on a cache line", npes, c.off, c.n, p, lo)
				}
				next = hi
			}
			if next != c.off+c.n {
				t.Fatalf("npes=%d off=%d n=%d: slices end at %d", npes, c.off, c.n, next)
			}
		}
	}
}
