package main

import (
	"slices"
	"testing"

	"github.com/symddp/symddp/datasets"
)

var _ datasets.Dataset = (*Spirals)(nil)

func TestSpiralsGather(t *testing.T) {
	s, err := NewSpirals(7, 3, 0.02, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 7 || s.Classes() != 3 || !slices.Equal(s.SampleShape(), []int{2}) {
		t.Fatalf("Len %d, Classes %d, SampleShape %v; want 7, 3, [2]", s.Len(), s.Classes(), s.SampleShape())
	}
	x := []float32{9, 9, 9, 9, 9, 9}
	y := []int32{9, 9, 9}
	s.Gather([]int{4, -1, 0}, x, y)
	if want := []int32{1, -1, 0}; !slices.Equal(y, want) {
		t.Errorf("labels %v, want %v", y, want)
	}
	if !slices.Equal(x[0:2], s.x[8:10]) || !slices.Equal(x[2:4], []float32{0, 0}) || !slices.Equal(x[4:6], s.x[0:2]) {
		t.Errorf("gathered %v from %v", x, s.x)
	}
	if n := testing.AllocsPerRun(10, func() { s.Gather([]int{4, -1, 0}, x, y) }); n != 0 {
		t.Errorf("Gather allocates %v times", n)
	}
}

func TestSpiralsDeterministicAndOnTheArms(t *testing.T) {
	a, _ := NewSpirals(300, 4, 0, 5)
	b, _ := NewSpirals(100, 4, 0, 5)
	if !slices.Equal(a.x[:200], b.x) || !slices.Equal(a.y[:100], b.y) {
		t.Error("NewSpirals(100, ...) is not a prefix of NewSpirals(300, ...) with the same seed")
	}
	c, _ := NewSpirals(100, 4, 0, 6)
	if slices.Equal(b.x, c.x) {
		t.Error("seeds 5 and 6 gave the same points")
	}
	counts := make([]int, 4)
	for i, label := range a.y {
		counts[label]++
		// Without noise every point lies at a radius in [0.1, 1].
		px, py := float64(a.x[2*i]), float64(a.x[2*i+1])
		if r2 := px*px + py*py; r2 < 0.0099 || r2 > 1.0001 {
			t.Errorf("point %d at radius² %v", i, r2)
		}
	}
	if !slices.Equal(counts, []int{75, 75, 75, 75}) {
		t.Errorf("class counts %v, want 75 each", counts)
	}
}

func TestSpiralsErrors(t *testing.T) {
	for _, tc := range []struct {
		n, arms int
		noise   float64
	}{{0, 3, 0}, {10, 1, 0}, {10, 3, -1}} {
		if _, err := NewSpirals(tc.n, tc.arms, tc.noise, 1); err == nil {
			t.Errorf("NewSpirals(%d, %d, %v) succeeded", tc.n, tc.arms, tc.noise)
		}
	}
}
