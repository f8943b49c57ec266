package datasets

import (
	"slices"
	"strings"
	"testing"
)

func TestBatcherFillsTheSampledRows(t *testing.T) {
	d := rowsDataset(t, 11, 3)
	s, _ := NewShardSampler(11, 8, 2, 1, 6)
	b, err := NewBatcher(s, d)
	if err != nil {
		t.Fatal(err)
	}
	if b.Rows() != 4 || b.SampleSize() != 6 || b.Sampler() != s {
		t.Fatalf("Rows %d, SampleSize %d", b.Rows(), b.SampleSize())
	}
	x := make([]float32, 4*6)
	y := make([]int32, 4)
	for step := range s.StepsPerEpoch() {
		b.Fill(2, step, x, y)
		idx := make([]int, 4)
		s.Batch(2, step, idx)
		wantX := make([]float32, 4*6)
		wantY := make([]int32, 4)
		d.Gather(idx, wantX, wantY)
		if !slices.Equal(x, wantX) || !slices.Equal(y, wantY) {
			t.Fatalf("step %d: got x %v y %v, want x %v y %v", step, x, y, wantX, wantY)
		}
	}
	// Step 1 of PE 1 covers positions 12..15, all past the 11 samples.
	if !slices.Equal(y, []int32{-1, -1, -1, -1}) || slices.ContainsFunc(x, func(v float32) bool { return v != 0 }) {
		t.Fatalf("padding rows: x %v y %v", x, y)
	}
}

func TestBatcherFillDoesNotAllocate(t *testing.T) {
	d := rowsDataset(t, 300, 10)
	s, _ := NewShardSampler(300, 64, 4, 0, 1)
	b, _ := NewBatcher(s, d)
	x := make([]float32, b.Rows()*b.SampleSize())
	y := make([]int32, b.Rows())
	epoch := 0
	allocs := testing.AllocsPerRun(20, func() {
		for step := range s.StepsPerEpoch() {
			b.Fill(epoch, step, x, y)
		}
		epoch++
	})
	if allocs != 0 {
		t.Fatalf("an epoch of Fill calls allocates %v times", allocs)
	}
}

func TestBatcherErrors(t *testing.T) {
	d := rowsDataset(t, 10, 3)
	s, _ := NewShardSampler(12, 4, 1, 0, 1)
	if _, err := NewBatcher(s, d); err == nil || !strings.Contains(err.Error(), "sampler over 12 samples for a dataset of 10") {
		t.Fatalf("error %v", err)
	}
	s, _ = NewShardSampler(10, 4, 1, 0, 1)
	b, _ := NewBatcher(s, d)
	if !panics(func() { b.Fill(0, 0, make([]float32, 23), make([]int32, 4)) }) {
		t.Error("Fill into a short x did not panic")
	}
}
