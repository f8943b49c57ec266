package datasets

import "fmt"

// Batcher fills one PE's local batch of a step: the rows its ShardSampler
// names, gathered from a Dataset into buffers the caller preallocated.
type Batcher struct {
	sampler *ShardSampler
	data    Dataset
	size    int   // values per sample
	idx     []int // (LocalBatch) scratch for the sampler's indices
}

// NewBatcher pairs a sampler with the dataset it samples from; their lengths
// must agree.
func NewBatcher(s *ShardSampler, d Dataset) (*Batcher, error) {
	if s.Len() != d.Len() {
		return nil, fmt.Errorf("batcher: sampler over %d samples for a dataset of %d", s.Len(), d.Len())
	}
	size := 1
	for _, dim := range d.SampleShape() {
		size *= dim
	}
	return &Batcher{sampler: s, data: d, size: size, idx: make([]int, s.LocalBatch())}, nil
}

// Rows is the number of rows of a local batch, padding included.
func (b *Batcher) Rows() int { return len(b.idx) }

// SampleSize is the number of values of one row.
func (b *Batcher) SampleSize() int { return b.size }

// Sampler returns the sampler the batcher follows.
func (b *Batcher) Sampler() *ShardSampler { return b.sampler }

// Fill writes the local batch of (epoch, step) into x and y: padding rows
// are zero with label -1. It does not allocate.
//
//	x is (Rows(), SampleSize()), y is (Rows())
func (b *Batcher) Fill(epoch, step int, x []float32, y []int32) {
	if len(x) != len(b.idx)*b.size || len(y) != len(b.idx) {
		panic(fmt.Sprintf("datasets: Fill into x of %d and y of %d, want %d and %d",
			len(x), len(y), len(b.idx)*b.size, len(b.idx)))
	}
	b.sampler.Batch(epoch, step, b.idx)
	b.data.Gather(b.idx, x, y)
}
