package datasets_test

import (
	"errors"
	"fmt"

	"github.com/symddp/symddp/datasets"
)

func ExampleShardSampler() {
	// 10 samples, global batch 4, 2 PEs: 3 steps, the last one half padding.
	for pe := range 2 {
		s, err := datasets.NewShardSampler(10, 4, 2, pe, 2024)
		if err != nil {
			fmt.Println(err)
			return
		}
		local := make([]int, s.LocalBatch())
		for step := range s.StepsPerEpoch() {
			s.Batch(0, step, local)
			fmt.Printf("PE %d step %d: %v, %d labelled in the global batch\n", pe, step, local, s.Labelled(step))
		}
	}
	// Output:
	// PE 0 step 0: [9 0], 4 labelled in the global batch
	// PE 0 step 1: [3 1], 4 labelled in the global batch
	// PE 0 step 2: [8 5], 2 labelled in the global batch
	// PE 1 step 0: [4 6], 4 labelled in the global batch
	// PE 1 step 1: [2 7], 4 labelled in the global batch
	// PE 1 step 2: [-1 -1], 2 labelled in the global batch
}

// Example_trainingData shows how a trainer gets its data: Fashion-MNIST when
// installed, standardised with the fixed constants, else synthetic data; then
// each PE's batches from a ShardSampler through a Batcher.
func Example_trainingData() {
	const pes, pe, globalBatch, seed = 4, 0, 256, 1
	name := "fashion-mnist"
	train, test, err := datasets.Load(name, "")
	var missing *datasets.NotInstalledError
	switch {
	case errors.As(err, &missing):
		fmt.Println(err)
		fmt.Println(missing.Hint())
		fmt.Println("using synthetic data")
		train, test, err = datasets.SyntheticSplit(60000, 10000, 784, 10, seed)
		if err != nil {
			panic(err)
		}
	case err != nil:
		fmt.Println(err)
		return
	default:
		mean, std, _ := datasets.PixelStats(name)
		train.Normalize(mean, std)
		test.Normalize(mean, std)
	}

	sampler, err := datasets.NewShardSampler(train.Len(), globalBatch, pes, pe, seed)
	if err != nil {
		fmt.Println(err)
		return
	}
	batcher, _ := datasets.NewBatcher(sampler, train)
	x := make([]float32, batcher.Rows()*batcher.SampleSize()) // (B/P, 784)
	y := make([]int32, batcher.Rows())                        // (B/P), -1 for padding
	for epoch := range 2 {
		for step := range sampler.StepsPerEpoch() {
			batcher.Fill(epoch, step, x, y)
			// forward, backward with the loss gradient scaled by
			// 1/sampler.Labelled(step), allreduce, optimizer step
		}
	}
	_ = test // evaluated through NewEvalSampler the same way
}
