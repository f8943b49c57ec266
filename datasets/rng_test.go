package datasets

import (
	"math"
	"slices"
	"testing"
)

func TestSplitMix64Reference(t *testing.T) {
	// Published outputs of SplitMix64 from state 0.
	r := rng{state: 0}
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		if got := r.next(); got != want {
			t.Fatalf("output %d = %#x, want %#x", i, got, want)
		}
	}
}

func TestStreamsDiffer(t *testing.T) {
	first := func(seed, domain, index uint64) uint64 { r := newRNG(seed, domain, index); return r.next() }
	base := first(1, domainEpochOrder, 0)
	for name, other := range map[string]uint64{
		"seed":   first(2, domainEpochOrder, 0),
		"domain": first(1, domainNoise, 0),
		"index":  first(1, domainEpochOrder, 1),
	} {
		if other == base {
			t.Errorf("changing the %s does not change the stream", name)
		}
	}
}

func TestBoundedIsUniform(t *testing.T) {
	r := newRNG(3, 0, 0)
	const n, draws = 10, 100_000
	var counts [n]int
	for range draws {
		counts[r.bounded(n)]++
	}
	// Each count is Binomial(100000, 0.1): standard deviation about 95.
	for v, c := range counts {
		if c < draws/n-500 || c > draws/n+500 {
			t.Errorf("value %d drawn %d times of %d, want about %d", v, c, draws, draws/n)
		}
	}
	// A bound just above 2^63 rejects almost half of the raw draws.
	const big = 1<<63 + 12345
	for range 1000 {
		if v := r.bounded(big); v >= big {
			t.Fatalf("bounded(%d) = %d", uint64(big), v)
		}
	}
	if v := r.bounded(1); v != 0 {
		t.Fatalf("bounded(1) = %d", v)
	}
}

func TestShuffleIsUniform(t *testing.T) {
	r := newRNG(4, 0, 0)
	counts := map[[3]int]int{}
	const draws = 60_000
	for range draws {
		a := []int{0, 1, 2}
		shuffle(&r, a)
		counts[[3]int(a)]++
	}
	if len(counts) != 6 {
		t.Fatalf("%d distinct permutations of 3, want 6", len(counts))
	}
	for p, c := range counts {
		if c < draws/6-600 || c > draws/6+600 { // sd about 91
			t.Errorf("permutation %v drawn %d times, want about %d", p, c, draws/6)
		}
	}
	a := make([]int, 1000)
	for i := range a {
		a[i] = i
	}
	shuffle(&r, a)
	slices.Sort(a)
	for i, v := range a {
		if v != i {
			t.Fatalf("shuffle lost or duplicated %d", i)
		}
	}
}

func TestNormalsMoments(t *testing.T) {
	r := newRNG(5, 0, 0)
	const pairs = 100_000
	var sum, sq, cross float64
	for range pairs {
		a, b := r.normals()
		if math.IsInf(a, 0) || math.IsNaN(a) || math.IsInf(b, 0) || math.IsNaN(b) {
			t.Fatalf("non-finite deviate %v, %v", a, b)
		}
		sum += a + b
		sq += a*a + b*b
		cross += a * b
	}
	n := float64(2 * pairs)
	mean, variance, corr := sum/n, sq/n, cross/pairs
	// Standard errors: mean 0.0022, variance 0.0032, correlation 0.0032.
	if math.Abs(mean) > 0.012 || math.Abs(variance-1) > 0.016 || math.Abs(corr) > 0.016 {
		t.Fatalf("mean %v, variance %v, correlation of a pair %v; want 0, 1, 0", mean, variance, corr)
	}
}
