package datasets

import (
	"math"
	"slices"
	"testing"
)

func TestSyntheticIsDeterministic(t *testing.T) {
	a, err := Synthetic(500, 784, 10, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Synthetic(500, 784, 10, 42)
	if !slices.Equal(float32Bits(a.X), float32Bits(b.X)) || !slices.Equal(a.Y, b.Y) {
		t.Fatal("two datasets from the same arguments differ")
	}
	c, _ := Synthetic(500, 784, 10, 43)
	if slices.Equal(a.X, c.X) || slices.Equal(a.Y, c.Y) {
		t.Fatal("another seed gives the same samples or labels")
	}
	if a.Len() != 500 || !slices.Equal(a.SampleShape(), []int{784}) || a.Classes() != 10 {
		t.Fatalf("%d samples of shape %v in %d classes", a.Len(), a.SampleShape(), a.Classes())
	}
}

func float32Bits(x []float32) []uint32 {
	b := make([]uint32, len(x))
	for i, v := range x {
		b[i] = math.Float32bits(v)
	}
	return b
}

func TestSyntheticIsAPrefixOfALargerSet(t *testing.T) {
	small, _ := Synthetic(37, 20, 7, 9)
	large, _ := Synthetic(100, 20, 7, 9)
	prefix := large.Subset(37)
	if !slices.Equal(float32Bits(small.X), float32Bits(prefix.X)) || !slices.Equal(small.Y, prefix.Y) {
		t.Fatal("Synthetic(37) is not the first 37 samples of Synthetic(100)")
	}
}

func TestSyntheticLabelsAreBalanced(t *testing.T) {
	d, _ := Synthetic(1003, 8, 10, 1)
	// 100 full blocks, and three classes in the last, partial one.
	counts := d.ClassCounts()
	extra := 0
	for c, n := range counts {
		if n != 100 && n != 101 {
			t.Errorf("class %d: %d samples, want 100 or 101", c, n)
		}
		extra += n - 100
	}
	if extra != 3 {
		t.Errorf("class counts %v", counts)
	}
	// Every block of 10 consecutive samples holds each class once, but
	// the blocks are not all in the same order.
	for lo := 0; lo+10 <= d.Len(); lo += 10 {
		block := slices.Clone(d.Y[lo : lo+10])
		slices.Sort(block)
		if !slices.Equal(block, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
			t.Fatalf("block at %d holds labels %v", lo, d.Y[lo:lo+10])
		}
	}
	if slices.Equal(d.Y[:10], d.Y[10:20]) && slices.Equal(d.Y[10:20], d.Y[20:30]) {
		t.Error("the first blocks share one order of labels")
	}
}

// TestSyntheticIsLearnable fits the simplest classifier, the nearest class
// mean estimated on the training part, and scores it on the held-out part.
func TestSyntheticIsLearnable(t *testing.T) {
	train, test, err := SyntheticSplit(5000, 1000, 784, 10, 7)
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 5000 || test.Len() != 1000 {
		t.Fatalf("split into %d and %d samples", train.Len(), test.Len())
	}
	dim, classes := train.SampleSize(), train.Classes()
	means := make([]float64, classes*dim)
	for i, label := range train.Y {
		for j, v := range train.X[i*dim : (i+1)*dim] {
			means[int(label)*dim+j] += float64(v)
		}
	}
	for c, n := range train.ClassCounts() {
		for j := range dim {
			means[c*dim+j] /= float64(n)
		}
	}
	correct := 0
	for i, label := range test.Y {
		row := test.X[i*dim : (i+1)*dim]
		best, bestDist := -1, math.Inf(1)
		for c := range classes {
			var dist float64
			for j, v := range row {
				d := float64(v) - means[c*dim+j]
				dist += d * d
			}
			if dist < bestDist {
				best, bestDist = c, dist
			}
		}
		if int32(best) == label {
			correct++
		}
	}
	accuracy := float64(correct) / float64(test.Len())
	t.Logf("nearest class mean: %.3f on held-out data", accuracy)
	if accuracy < 0.9 {
		t.Fatalf("nearest class mean scores %.3f on held-out data, want > 0.9 (chance 0.1)", accuracy)
	}
}

func TestSyntheticErrors(t *testing.T) {
	for _, args := range [][3]int{{0, 784, 10}, {10, 0, 10}, {10, 784, 1}} {
		if _, err := Synthetic(args[0], args[1], args[2], 1); err == nil {
			t.Errorf("Synthetic(%d, %d, %d) succeeded", args[0], args[1], args[2])
		}
	}
	if _, _, err := SyntheticSplit(10, 0, 784, 10, 1); err == nil {
		t.Error("SyntheticSplit with an empty test part succeeded")
	}
}
