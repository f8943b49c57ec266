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

// TestPartShardTilesThePart: every PE's piece of a part lies in its shard
// and in the part, and the pieces tile the part in PE order, for parts
// inside one shard, across shard boundaries, empty, and the whole range.
func TestPartShardTilesThePart(t *testing.T) {
	for _, npes := range []int{1, 2, 3, 4, 7} {
		for _, c := range []struct{ off, n int }{{0, 0}, {0, 30}, {3, 7}, {5, 1000}} {
			parts := [][2]int{{c.off, c.off}, {c.off, c.off + c.n}, {c.off + c.n, c.off + c.n}}
			for _, cut := range []int{1, 15, 16, 17, 333} {
				if cut < c.n {
					parts = append(parts, [2]int{c.off, c.off + cut}, [2]int{c.off + cut, c.off + c.n}, [2]int{c.off + cut/2, c.off + cut})
				}
			}
			for _, part := range parts {
				next := part[0]
				for p := 0; p < npes; p++ {
					lo, hi := PartShard(c.off, c.n, npes, p, part[0], part[1])
					slo, shi := Shard(c.off, c.n, npes, p)
					if lo != next || hi < lo || (hi > lo && (lo < slo || hi > shi)) {
						t.Fatalf("npes=%d range [%d, %d) part %v: PE %d (shard [%d, %d)) gets [%d, %d), want it to start at %d inside its shard",
							npes, c.off, c.off+c.n, part, p, slo, shi, lo, hi, next)
					}
					if want := min(shi, part[1]) - max(slo, part[0]); hi-lo != max(want, 0) {
						t.Fatalf("npes=%d range [%d, %d) part %v: PE %d gets %d elements, want %d", npes, c.off, c.off+c.n, part, p, hi-lo, max(want, 0))
					}
					next = hi
				}
				if next != part[1] {
					t.Fatalf("npes=%d range [%d, %d) part %v: pieces end at %d", npes, c.off, c.off+c.n, part, next)
				}
			}
		}
	}
}
