package datasets_test

import (
	"fmt"

	"github.com/symddp/symddp/datasets"
)

// Data a program already holds in memory becomes a Dataset with
// NewInMemory: one flat slice of samples, row-major, and one of labels. The
// slices are not copied.
func ExampleNewInMemory() {
	x := []float32{ // 4 samples of shape [3]: (N, 3)
		0.1, 0.2, 0.3,
		1.1, 1.2, 1.3,
		2.1, 2.2, 2.3,
		3.1, 3.2, 3.3,
	}
	y := []int32{0, 1, 1, 0}
	d, err := datasets.NewInMemory(x, y, []int{3}, 2)
	if err != nil {
		panic(err)
	}
	train, test := d.Split(1) // the last sample is held out
	fmt.Println(d.Len(), d.SampleShape(), d.Classes(), d.ClassCounts(), train.Len(), test.Len())

	rows, labels := make([]float32, 2*3), make([]int32, 2)
	d.Gather([]int{2, -1}, rows, labels) // -1 is a padding row
	fmt.Println(rows, labels)

	_, err = datasets.NewInMemory(x, []int32{0, 1, 2, 0}, []int{3}, 2)
	fmt.Println(err)
	// Output:
	// 4 [3] 2 [2 2] 3 1
	// [2.1 2.2 2.3 0 0 0] [1 -1]
	// label 2 of sample 2 is outside [0, 2)
}

// squares is a Dataset of its own: sample i is the pair (i, i²) scaled to
// [0, 1], labelled by whether i is even. Any type with these four methods
// can be trained on; ddp.Trainer.Fit calls Gather for every local batch.
type squares struct{ n int }

func (s squares) Len() int           { return s.n }
func (s squares) SampleShape() []int { return []int{2} }
func (s squares) Classes() int       { return 2 }

// Gather fills x (len(idx), 2) and y (len(idx)); -1 is padding. It must not
// allocate: it runs on every step.
func (s squares) Gather(idx []int, x []float32, y []int32) {
	for i, j := range idx {
		if j == -1 {
			x[2*i], x[2*i+1], y[i] = 0, 0, -1
			continue
		}
		f := float32(j) / float32(s.n)
		x[2*i], x[2*i+1], y[i] = f, f*f, int32(j%2)
	}
}

// A custom dataset, sharded over 2 PEs by a ShardSampler and gathered by a
// Batcher as the trainer does: PE 1's local batches of the first epoch.
func Example_customDataset() {
	var d datasets.Dataset = squares{n: 5}
	s, err := datasets.NewShardSampler(d.Len(), 4, 2, 1, 7) // global batch 4, PE 1 of 2, seed 7
	if err != nil {
		panic(err)
	}
	b, err := datasets.NewBatcher(s, d)
	if err != nil {
		panic(err)
	}
	x, y := make([]float32, b.Rows()*b.SampleSize()), make([]int32, b.Rows())
	for step := range s.StepsPerEpoch() {
		b.Fill(0, step, x, y)
		fmt.Printf("step %d: x %.2f, y %v\n", step, x, y)
	}
	// Output:
	// step 0: x [0.60 0.36 0.40 0.16], y [1 0]
	// step 1: x [0.00 0.00 0.00 0.00], y [-1 -1]
}
