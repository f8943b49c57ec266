// Package datasets holds symddp's data: the Dataset interface, the IDX reader
// for MNIST and Fashion-MNIST, a synthetic learnable dataset, and the
// ShardSampler that gives each PE its disjoint shard of every global batch.
package datasets

// Dataset is a labelled classification dataset held in memory.
type Dataset interface {
	// Len is the number of samples.
	Len() int
	// SampleShape is the shape of one sample ([784] for flattened 28x28).
	SampleShape() []int
	// Classes is the number of classes; labels are 0..Classes()-1.
	Classes() int
	// Gather copies samples idx[i] into x[i*size:(i+1)*size] and their
	// labels into y[i], where size is the product of SampleShape. An index
	// of -1 is padding: x's row is zeroed and y[i] = -1. It does not allocate.
	Gather(idx []int, x []float32, y []int32)
}
