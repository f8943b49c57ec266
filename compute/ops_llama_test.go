package compute

import "testing"

// TestGroupedHeads pins the query-to-key/value head mapping that every
// engine takes from GroupedAttentionSpec: repeat_kv's order, query heads
// g·j .. g·j+g-1 on key/value head j.
func TestGroupedHeads(t *testing.T) {
	s := GroupedAttentionSpec{B: 1, T: 1, Heads: 12, KVHeads: 4, HeadSize: 2}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	want := []int{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3}
	for h, j := range want {
		if got := s.KVHead(h); got != j {
			t.Errorf("KVHead(%d) = %d, want %d", h, got, j)
		}
		if got, first := s.FirstOfGroup(h), h%3 == 0; got != first {
			t.Errorf("FirstOfGroup(%d) = %v, want %v", h, got, first)
		}
	}
	if g := s.Group(); g != 3 {
		t.Errorf("Group() = %d, want 3", g)
	}
	for _, bad := range []GroupedAttentionSpec{{B: 1, T: 1, Heads: 6, KVHeads: 4, HeadSize: 2}, {B: 0, T: 1, Heads: 2, KVHeads: 1, HeadSize: 2}} {
		if bad.Check() == nil {
			t.Errorf("Check(%+v) = nil, want an error", bad)
		}
	}
}
