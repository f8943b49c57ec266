package datasets

// Source is what the trainer reads a batch from: a classifier's Dataset
// (through AsSource) or a token dataset. Its samples are described by a
// Spec; GatherBatch copies chosen samples into a Batch.
type Source interface {
	// Len is the number of samples (for token data: training windows).
	Len() int
	// Spec describes one sample's input and targets.
	Spec() Spec
	// GatherBatch copies samples idx[i] into row i of b: inputs into b.X
	// (float inputs) or b.Tokens (token inputs), targets into b.Y. An index
	// of -1 is padding: its inputs are zero and its targets -1. It does not
	// allocate.
	GatherBatch(idx []int, b Batch)
}

// TargetCounter is a Source that counts the labelled targets (those not
// -1) of chosen samples without gathering them. The trainer divides a
// step's summed loss by that count over the whole global batch, so that the
// gradient is that of the mean loss it prints (the mean over the labelled
// targets); a Source without it has every row of the global batch gathered
// on each PE to count them, each step. The built-in sources have it.
type TargetCounter interface {
	// LabelledTargets is the number of targets that are not -1 in the
	// samples idx; an index of -1 is padding, which has none.
	LabelledTargets(idx []int) int
}

// samples is the number of indices in idx that are not padding (-1).
func samples(idx []int) int {
	n := 0
	for _, i := range idx {
		if i >= 0 {
			n++
		}
	}
	return n
}

// Spec describes the samples of a Source.
type Spec struct {
	// Input is the shape of one sample's input: [784] for a flattened
	// image, [T] for a window of T tokens.
	Input []int
	// Tokens says the inputs are int32 token ids (Batch.Tokens), not float32
	// values (Batch.X).
	Tokens bool
	// Targets is the number of targets of one sample: 1 for a class label,
	// T for a token window (the next token at every position).
	Targets int
	// Classes is the number of classes, or the vocabulary's size: targets
	// are 0..Classes-1, or -1 for "ignore": the loss (and its gradient) is
	// the mean over the targets that are not -1 (TargetCounter).
	Classes int
}

// InputSize is the number of input values of one sample.
func (s Spec) InputSize() int {
	n := 1
	for _, d := range s.Input {
		n *= d
	}
	return n
}

// Batch is a batch of rows in host memory: row i's input is
// X[i·InputSize:(i+1)·InputSize] (or the same range of Tokens) and its
// targets Y[i·Targets:(i+1)·Targets].
type Batch struct {
	X      []float32
	Tokens []int32
	Y      []int32
}

// AsSource returns a classifier Dataset as a Source: float inputs of the
// dataset's sample shape and one label per sample. A Source passed in is
// returned as it is.
func AsSource(d Dataset) Source {
	if s, ok := d.(Source); ok {
		return s
	}
	return datasetSource{d}
}

// classifierSpec is the Spec of a classifier dataset.
func classifierSpec(d Dataset) Spec {
	return Spec{Input: d.SampleShape(), Targets: 1, Classes: d.Classes()}
}

type datasetSource struct{ d Dataset }

func (s datasetSource) Len() int { return s.d.Len() }

func (s datasetSource) Spec() Spec { return classifierSpec(s.d) }

func (s datasetSource) GatherBatch(idx []int, b Batch) { s.d.Gather(idx, b.X, b.Y) }

// LabelledTargets is the samples of idx: a Dataset labels each (0 to
// Classes()-1).
func (s datasetSource) LabelledTargets(idx []int) int { return samples(idx) }

// LabelledTargets is the samples of idx, each labelled.
func (d *InMemory) LabelledTargets(idx []int) int { return samples(idx) }

// LabelledTargets is the samples of idx, each labelled.
func (d *ByteSamples) LabelledTargets(idx []int) int { return samples(idx) }

// Spec is float inputs of the sample shape and one label per sample.
func (d *InMemory) Spec() Spec { return classifierSpec(d) }

// GatherBatch is Gather into b.X and b.Y.
func (d *InMemory) GatherBatch(idx []int, b Batch) { d.Gather(idx, b.X, b.Y) }

// Spec is float inputs of the sample shape and one label per sample.
func (d *ByteSamples) Spec() Spec { return classifierSpec(d) }

// GatherBatch is Gather into b.X and b.Y.
func (d *ByteSamples) GatherBatch(idx []int, b Batch) { d.Gather(idx, b.X, b.Y) }
