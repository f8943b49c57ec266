package datasets

import "fmt"

// ShardSampler says which samples one PE takes at each step, following
// docs/DESIGN.md, "Global batches and shards":
//
//   - the order of an epoch is a permutation of [0, N) drawn from
//     (seed, epoch) alone, whatever the PE count (evaluation samplers use
//     the identity order);
//   - global step s covers positions [s·B, (s+1)·B) of that order, and PE p
//     takes positions s·B + p·B/P + j for j in [0, B/P);
//   - positions past N are padding, index -1.
//
// So every sample is seen exactly once per epoch, the shards of a step are
// disjoint, and the global batches do not depend on P.
//
// A ShardSampler caches the order of the last epoch it was asked for, and
// of one more that Prefetch computes in the background; it is not safe for
// concurrent use.
type ShardSampler struct {
	n, batch, pes, pe int
	seed              uint64
	order             []int // the order of epoch cachedEpoch; nil: identity
	cachedEpoch       int   // -1 before the first Batch
	// Prefetch's order: of epoch spareEpoch once spareDone is closed; nil
	// channel when none is pending
	spare      []int
	spareEpoch int
	spareDone  chan struct{}
	inline     int // epoch orders Batch computed itself (InlineOrders)
}

// NewShardSampler returns the sampler of PE pe of pes for a dataset of n
// samples, global batch globalBatch and shuffling seed seed. globalBatch must
// be a multiple of pes.
func NewShardSampler(n, globalBatch, pes, pe int, seed uint64) (*ShardSampler, error) {
	if err := checkSampler(n, globalBatch, pes, pe); err != nil {
		return nil, err
	}
	return &ShardSampler{n: n, batch: globalBatch, pes: pes, pe: pe, seed: seed,
		order: make([]int, n), cachedEpoch: -1}, nil
}

// NewEvalSampler returns a sampler like NewShardSampler's whose order is the
// identity in every epoch, for evaluating on a test set sharded across PEs.
func NewEvalSampler(n, globalBatch, pes, pe int) (*ShardSampler, error) {
	if err := checkSampler(n, globalBatch, pes, pe); err != nil {
		return nil, err
	}
	return &ShardSampler{n: n, batch: globalBatch, pes: pes, pe: pe, cachedEpoch: -1}, nil
}

func checkSampler(n, globalBatch, pes, pe int) error {
	switch {
	case n <= 0:
		return fmt.Errorf("sampler over %d samples: the dataset is empty", n)
	case pes <= 0:
		return fmt.Errorf("sampler for %d PEs: need at least one", pes)
	case pe < 0 || pe >= pes:
		return fmt.Errorf("sampler for PE %d of %d: PE outside [0, %d)", pe, pes, pes)
	case globalBatch <= 0:
		return fmt.Errorf("global batch %d: must be positive", globalBatch)
	case globalBatch%pes != 0:
		below := globalBatch - globalBatch%pes
		if below == 0 {
			return fmt.Errorf("global batch %d is not a multiple of the %d PEs: use %d or a multiple of it",
				globalBatch, pes, pes)
		}
		return fmt.Errorf("global batch %d is not a multiple of the %d PEs: use %d or %d",
			globalBatch, pes, below, below+pes)
	}
	return nil
}

// Len is the number of samples N of the dataset.
func (s *ShardSampler) Len() int { return s.n }

// GlobalBatch is B, the rows of one step summed over all PEs.
func (s *ShardSampler) GlobalBatch() int { return s.batch }

// LocalBatch is B/P, the rows of one step on this PE, padding included.
func (s *ShardSampler) LocalBatch() int { return s.batch / s.pes }

// StepsPerEpoch is ceil(N/B).
func (s *ShardSampler) StepsPerEpoch() int { return (s.n + s.batch - 1) / s.batch }

// Batch writes into dst, of length LocalBatch(), the dataset indices of this
// PE's rows at step step of epoch epoch, -1 for padding. It allocates
// nothing; the first call for an epoch computes that epoch's order (O(N)).
// It panics when epoch < 0, step is outside [0, StepsPerEpoch()) or dst has
// the wrong length: those are programming errors.
func (s *ShardSampler) Batch(epoch, step int, dst []int) {
	if epoch < 0 || step < 0 || step >= s.StepsPerEpoch() || len(dst) != s.LocalBatch() {
		panic(fmt.Sprintf("datasets: Batch(epoch %d, step %d, dst of %d) of a sampler with %d steps of %d local rows",
			epoch, step, len(dst), s.StepsPerEpoch(), s.LocalBatch()))
	}
	s.prepare(epoch)
	s.positions(step*s.batch+s.pe*s.LocalBatch(), dst)
}

// positions writes the samples at positions first, first+1, ... of the
// prepared order into dst, -1 past the dataset's end.
func (s *ShardSampler) positions(first int, dst []int) {
	for j := range dst {
		switch pos := first + j; {
		case pos >= s.n:
			dst[j] = -1
		case s.order == nil:
			dst[j] = pos
		default:
			dst[j] = s.order[pos]
		}
	}
}

// StepRows writes into dst, of length GlobalBatch(), the dataset indices of
// every PE's rows at step step of epoch epoch, PE 0's first, -1 for
// padding: what Batch gives each PE, side by side.
func (s *ShardSampler) StepRows(epoch, step int, dst []int) {
	if epoch < 0 || step < 0 || step >= s.StepsPerEpoch() || len(dst) != s.batch {
		panic(fmt.Sprintf("datasets: StepRows(epoch %d, step %d, dst of %d) of a sampler with %d steps of %d rows",
			epoch, step, len(dst), s.StepsPerEpoch(), s.batch))
	}
	s.prepare(epoch)
	s.positions(step*s.batch, dst)
}

// Prefetch starts computing the order of epoch in a goroutine, so that the
// epoch's first Batch finds it ready instead of computing it then (O(N):
// about 145 us for 60000 samples on one core; a GPU step of the small MLP
// at batch 4096 takes 260 us). That Batch waits for it if it is not done.
// The first call allocates a second order of N ints. It does nothing for
// evaluation samplers, for a negative epoch or for the cached one.
//
// One order is prefetched at a time: Prefetch of another epoch replaces a
// pending one that no Batch has taken yet. So ask for epoch e+1 once epoch
// e's first Batch has been made (Fit does, after each epoch's first step),
// not before: asked for at the start of epoch e, epoch e+1's order would
// replace epoch e's, which Batch would then compute itself.
func (s *ShardSampler) Prefetch(epoch int) {
	if s.order == nil || epoch < 0 || epoch == s.cachedEpoch || (s.spareDone != nil && s.spareEpoch == epoch) {
		return
	}
	if s.spareDone != nil {
		<-s.spareDone // the goroutine still writes s.spare
	}
	if s.spare == nil {
		s.spare = make([]int, s.n)
	}
	done := make(chan struct{})
	s.spareEpoch, s.spareDone = epoch, done
	go func(order []int, seed uint64) {
		epochOrder(order, seed, epoch)
		close(done)
	}(s.spare, s.seed)
}

// prepare makes s.order the order of epoch.
func (s *ShardSampler) prepare(epoch int) {
	if s.order == nil || s.cachedEpoch == epoch {
		return
	}
	if s.spareDone != nil && s.spareEpoch == epoch {
		<-s.spareDone
		s.order, s.spare, s.spareDone = s.spare, s.order, nil
	} else {
		epochOrder(s.order, s.seed, epoch)
		s.inline++
	}
	s.cachedEpoch = epoch
}

// InlineOrders is the number of epochs whose order Batch computed itself,
// on the caller's goroutine, because no Prefetch had it ready: 1 in a run
// that prefetches every epoch after the first (a diagnostic).
func (s *ShardSampler) InlineOrders() int { return s.inline }

// epochOrder writes the order of epoch, from seed, into order.
func epochOrder(order []int, seed uint64, epoch int) {
	for i := range order {
		order[i] = i
	}
	r := newRNG(seed, domainEpochOrder, uint64(epoch))
	shuffle(&r, order)
}

// Labelled is the number of rows of global step step that are not padding,
// summed over all PEs: B for every step but possibly the last.
func (s *ShardSampler) Labelled(step int) int {
	if step < 0 || step >= s.StepsPerEpoch() {
		panic(fmt.Sprintf("datasets: Labelled(step %d) of a sampler with %d steps", step, s.StepsPerEpoch()))
	}
	return min(s.batch, s.n-step*s.batch)
}
