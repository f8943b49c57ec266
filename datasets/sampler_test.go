package datasets

import (
	"slices"
	"strings"
	"testing"
)

// globalBatches returns, for one epoch, the global batch of every step:
// the local batches of PEs 0..pes-1 concatenated.
func globalBatches(t *testing.T, n, batch, pes int, seed uint64, epoch int) [][]int {
	t.Helper()
	samplers := make([]*ShardSampler, pes)
	for pe := range pes {
		s, err := NewShardSampler(n, batch, pes, pe, seed)
		if err != nil {
			t.Fatal(err)
		}
		samplers[pe] = s
	}
	steps := samplers[0].StepsPerEpoch()
	out := make([][]int, steps)
	for step := range steps {
		for _, s := range samplers {
			local := make([]int, s.LocalBatch())
			s.Batch(epoch, step, local)
			out[step] = append(out[step], local...)
		}
	}
	return out
}

func TestShardSamplerCoversTheDatasetOncePerEpoch(t *testing.T) {
	const n, batch = 103, 16 // 7 steps, 9 rows of padding in the last
	for _, pes := range []int{1, 2, 4, 8, 16} {
		for epoch := range 3 {
			batches := globalBatches(t, n, batch, pes, 11, epoch)
			if len(batches) != 7 {
				t.Fatalf("P=%d: %d steps, want 7", pes, len(batches))
			}
			seen := make([]int, n)
			for step, global := range batches {
				// Disjoint shards: no index twice within the step.
				inStep := map[int]int{}
				for pos, i := range global {
					if i == -1 {
						if step*batch+pos < n {
							t.Fatalf("P=%d epoch %d: padding at global position %d, before the end %d", pes, epoch, step*batch+pos, n)
						}
						continue
					}
					if step*batch+pos >= n {
						t.Fatalf("P=%d epoch %d: index %d at global position %d, past the end", pes, epoch, i, step*batch+pos)
					}
					if pe, dup := inStep[i]; dup {
						t.Fatalf("P=%d epoch %d step %d: index %d in the shards of PEs %d and %d", pes, epoch, step, i, pe, pos/(batch/pes))
					}
					inStep[i] = pos / (batch / pes)
					seen[i]++
				}
			}
			// Union: every index exactly once.
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("P=%d epoch %d: index %d seen %d times", pes, epoch, i, c)
				}
			}
		}
	}
}

func TestShardSamplerGlobalBatchesDoNotDependOnPEs(t *testing.T) {
	const n, batch = 1000, 48
	want := globalBatches(t, n, batch, 1, 5, 3)
	for _, pes := range []int{2, 3, 4, 6, 8, 12, 16, 24, 48} {
		if got := globalBatches(t, n, batch, pes, 5, 3); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("P=%d: the global batches differ from those of P=1", pes)
		}
	}
}

func TestShardSamplerOrderDependsOnSeedAndEpoch(t *testing.T) {
	const n, batch, pes = 500, 20, 4
	order := func(seed uint64, epoch int) []int {
		return slices.Concat(globalBatches(t, n, batch, pes, seed, epoch)...)
	}
	e0, e1, e2 := order(1, 0), order(1, 1), order(1, 2)
	if slices.Equal(e0, e1) || slices.Equal(e1, e2) || slices.Equal(e0, e2) {
		t.Error("the order does not change from epoch to epoch")
	}
	if !slices.Equal(order(1, 1), e1) {
		t.Error("the same seed and epoch give another order")
	}
	if slices.Equal(order(2, 1), e1) {
		t.Error("another seed gives the same order")
	}
	identity := make([]int, n)
	for i := range identity {
		identity[i] = i
	}
	if slices.Equal(e0, identity) {
		t.Error("epoch 0 is not shuffled")
	}
}

// TestShardSamplerOrderIsPinned guards the exact bits of the epoch order:
// a checkpoint resumed by another build must see the same batches.
func TestShardSamplerOrderIsPinned(t *testing.T) {
	got := globalBatches(t, 10, 10, 2, 2024, 0)[0]
	want := []int{9, 0, 4, 6, 3, 1, 2, 7, 8, 5}
	if !slices.Equal(got, want) {
		t.Fatalf("epoch 0 of seed 2024 over 10 samples is %v, want %v", got, want)
	}
}

func TestShardSamplerCacheFollowsTheEpoch(t *testing.T) {
	s, _ := NewShardSampler(50, 10, 2, 1, 3)
	first := make([]int, 5)
	s.Batch(4, 2, first)
	other := make([]int, 5)
	s.Batch(7, 2, other)
	again := make([]int, 5)
	s.Batch(4, 2, again)
	if !slices.Equal(first, again) || slices.Equal(first, other) {
		t.Fatalf("epoch 4 gives %v, then %v after epoch 7 (%v)", first, again, other)
	}
}

// Prefetch changes no batch: an epoch's batches are the same whether its
// order was computed in the background or not, when the prefetched epoch is
// the next one, another one, or asked for twice.
func TestShardSamplerPrefetchGivesTheSameBatches(t *testing.T) {
	plain, _ := NewShardSampler(97, 8, 2, 1, 5)
	pre, _ := NewShardSampler(97, 8, 2, 1, 5)
	want, got := make([]int, 4), make([]int, 4)
	check := func(epoch int) {
		t.Helper()
		for step := range plain.StepsPerEpoch() {
			plain.Batch(epoch, step, want)
			pre.Batch(epoch, step, got)
			if !slices.Equal(want, got) {
				t.Fatalf("epoch %d step %d: %v with Prefetch, %v without", epoch, step, got, want)
			}
		}
	}
	check(0)
	pre.Prefetch(1)
	pre.Prefetch(1)
	check(1)
	pre.Prefetch(5) // not the next epoch asked for
	check(2)
	check(5)
	pre.Prefetch(5) // the cached epoch: nothing to do
	pre.Prefetch(6)
	pre.Prefetch(7) // replaces 6 once 6 is done
	check(7)
	check(6)
	ev, _ := NewEvalSampler(10, 5, 1, 0)
	ev.Prefetch(1)
	if ev.spareDone != nil || ev.spare != nil {
		t.Error("Prefetch of an evaluation sampler started work")
	}
}

// TestShardSamplerPrefetchIsTaken: Prefetch(e+1) after epoch e's first
// Batch (as Fit calls it) leaves Batch only the first epoch's order to
// compute; asked for before that first Batch, the prefetch of e+1 replaces
// e's and every epoch is computed inline.
func TestShardSamplerPrefetchIsTaken(t *testing.T) {
	for _, tc := range []struct {
		name       string
		afterFirst bool
		inline     int
	}{{"after the epoch's first batch", true, 1}, {"before it", false, 4}} {
		s, _ := NewShardSampler(97, 8, 2, 1, 5)
		dst := make([]int, 4)
		for epoch := range 4 {
			if !tc.afterFirst {
				s.Prefetch(epoch + 1)
			}
			for step := range s.StepsPerEpoch() {
				s.Batch(epoch, step, dst)
				if tc.afterFirst && step == 0 {
					s.Prefetch(epoch + 1)
				}
			}
		}
		if s.InlineOrders() != tc.inline {
			t.Errorf("Prefetch %s: %d epoch orders computed by Batch, want %d", tc.name, s.InlineOrders(), tc.inline)
		}
	}
}

// StepRows is every PE's Batch side by side, whichever PE's sampler is
// asked, padding at the end included.
func TestShardSamplerStepRows(t *testing.T) {
	const n, batch, pes = 103, 16, 4
	want := globalBatches(t, n, batch, pes, 9, 2)
	s, _ := NewShardSampler(n, batch, pes, 3, 9)
	rows := make([]int, batch)
	for step := range s.StepsPerEpoch() {
		s.StepRows(2, step, rows)
		if !slices.Equal(rows, want[step]) {
			t.Fatalf("step %d: StepRows %v, the PEs' batches %v", step, rows, want[step])
		}
	}
	if got := (&TokenSource{context: 8}).LabelledTargets(rows); got != 7*8 { // the last step: 7 windows
		t.Errorf("LabelledTargets of the last step's windows: %d, want 56", got)
	}
}

func TestShardSamplerLabelled(t *testing.T) {
	s, _ := NewShardSampler(103, 16, 4, 2, 0)
	if s.StepsPerEpoch() != 7 || s.LocalBatch() != 4 || s.GlobalBatch() != 16 || s.Len() != 103 {
		t.Fatalf("StepsPerEpoch %d, LocalBatch %d, GlobalBatch %d, Len %d", s.StepsPerEpoch(), s.LocalBatch(), s.GlobalBatch(), s.Len())
	}
	var got []int
	for step := range s.StepsPerEpoch() {
		got = append(got, s.Labelled(step))
	}
	if !slices.Equal(got, []int{16, 16, 16, 16, 16, 16, 7}) {
		t.Fatalf("Labelled = %v", got)
	}
	// PE 2 of 4 holds positions 104..107 of the last step: all padding.
	dst := make([]int, 4)
	s.Batch(0, 6, dst)
	if !slices.Equal(dst, []int{-1, -1, -1, -1}) {
		t.Fatalf("last local batch of PE 2 = %v", dst)
	}
	// More PEs than samples: a single step, mostly padding.
	tiny, _ := NewShardSampler(3, 8, 8, 5, 0)
	if tiny.StepsPerEpoch() != 1 || tiny.Labelled(0) != 3 {
		t.Fatalf("3 samples, batch 8: %d steps, %d labelled", tiny.StepsPerEpoch(), tiny.Labelled(0))
	}
}

func TestEvalSamplerIsInOrder(t *testing.T) {
	const n, batch, pes = 10, 4, 2
	var got [][]int
	for epoch := range 2 {
		for step := range 3 {
			for pe := range pes {
				s, err := NewEvalSampler(n, batch, pes, pe)
				if err != nil {
					t.Fatal(err)
				}
				dst := make([]int, 2)
				s.Batch(epoch, step, dst)
				got = append(got, dst)
			}
		}
	}
	want := [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {-1, -1}}
	want = append(want, want...)
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("evaluation batches %v, want %v", got, want)
	}
}

func TestNewShardSamplerErrors(t *testing.T) {
	cases := []struct {
		n, batch, pes, pe int
		want              string
	}{
		{100, 100, 8, 0, "global batch 100 is not a multiple of the 8 PEs: use 96 or 104"},
		{100, 3, 8, 0, "global batch 3 is not a multiple of the 8 PEs: use 8 or a multiple of it"},
		{100, 0, 1, 0, "global batch 0: must be positive"},
		{0, 8, 1, 0, "the dataset is empty"},
		{100, 8, 0, 0, "0 PEs"},
		{100, 8, 2, 2, "PE 2 of 2"},
		{100, 8, 2, -1, "PE -1 of 2"},
	}
	for _, c := range cases {
		_, err := NewShardSampler(c.n, c.batch, c.pes, c.pe, 1)
		_, evalErr := NewEvalSampler(c.n, c.batch, c.pes, c.pe)
		for _, e := range []error{err, evalErr} {
			if e == nil || !strings.Contains(e.Error(), c.want) {
				t.Errorf("sampler(n %d, batch %d, %d PEs, PE %d): error %v, want %q", c.n, c.batch, c.pes, c.pe, e, c.want)
			}
		}
	}
}

func TestShardSamplerBatchDoesNotAllocate(t *testing.T) {
	s, _ := NewShardSampler(1000, 64, 4, 3, 9)
	dst := make([]int, s.LocalBatch())
	epoch := 0
	allocs := testing.AllocsPerRun(50, func() {
		for step := range s.StepsPerEpoch() {
			s.Batch(epoch, step, dst)
		}
		epoch++ // every run computes a new order
	})
	if allocs != 0 {
		t.Fatalf("an epoch of Batch calls allocates %v times", allocs)
	}
}

func TestShardSamplerPanicsOnProgrammingErrors(t *testing.T) {
	s, _ := NewShardSampler(100, 10, 2, 0, 1)
	for name, f := range map[string]func(){
		"step past the epoch": func() { s.Batch(0, 10, make([]int, 5)) },
		"negative step":       func() { s.Batch(0, -1, make([]int, 5)) },
		"negative epoch":      func() { s.Batch(-1, 0, make([]int, 5)) },
		"dst too short":       func() { s.Batch(0, 0, make([]int, 4)) },
		"Labelled past":       func() { s.Labelled(10) },
	} {
		if !panics(f) {
			t.Errorf("%s: no panic", name)
		}
	}
}
