package datasets

import (
	"math"
	"math/bits"
)

// rng is the package's own pseudo-random generator: SplitMix64 (Steele, Lea
// and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014).
// Every random choice of the package (epoch orders, synthetic data) is drawn
// from it, so the bits depend only on the seed and on this file, never on the
// algorithms of math/rand.
type rng struct {
	state uint64
}

// Stream domains keep the sequences of unrelated uses of one seed apart.
const (
	domainEpochOrder uint64 = 0x6570_6f63_685f_6f72 // "epoch_or"
	domainCentroids  uint64 = 0x6365_6e74_726f_6964 // "centroid"
	domainLabels     uint64 = 0x6c61_6265_6c73_5f5f // "labels__"
	domainNoise      uint64 = 0x6e6f_6973_655f_5f5f // "noise___"
)

const golden = 0x9e37_79b9_7f4a_7c15 // 2^64 / φ, SplitMix64's increment

// mix64 is SplitMix64's finaliser, a bijection of uint64 with full avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58_476d_1ce4_e5b9
	z = (z ^ (z >> 27)) * 0x94d0_49bb_1331_11eb
	return z ^ (z >> 31)
}

// newRNG returns the generator of stream (domain, index) of seed. Distinct
// triples give unrelated sequences.
func newRNG(seed, domain, index uint64) rng {
	s := mix64(seed + golden)
	s = mix64(s ^ domain)
	s = mix64(s + index*golden)
	return rng{state: s}
}

// next returns 64 uniformly distributed bits.
func (r *rng) next() uint64 {
	r.state += golden
	return mix64(r.state)
}

// bounded returns a uniform integer in [0, n) without bias, by Lemire's
// multiply-and-reject method ("Fast random integer generation in an
// interval", ACM TOMACS 2019). n must be positive.
func (r *rng) bounded(n uint64) uint64 {
	hi, lo := bits.Mul64(r.next(), n)
	if lo < n {
		threshold := -n % n // 2^64 mod n
		for lo < threshold {
			hi, lo = bits.Mul64(r.next(), n)
		}
	}
	return hi
}

// shuffle applies a uniform random permutation to a by Fisher–Yates, drawing
// from r.
func shuffle[T any](r *rng, a []T) {
	for i := len(a) - 1; i > 0; i-- {
		j := int(r.bounded(uint64(i) + 1))
		a[i], a[j] = a[j], a[i]
	}
}

// normals returns two independent standard normal deviates by the
// Box–Muller transform. It uses no fusable multiply-add, so its bits depend
// only on the platform's math.Log, math.Sqrt and math.Sincos.
func (r *rng) normals() (float64, float64) {
	// u1 in (0, 1] so that the logarithm is finite; u2 in [0, 1).
	u1 := float64((r.next()>>11)+1) * 0x1p-53
	u2 := float64(r.next()>>11) * 0x1p-53
	radius := math.Sqrt(-2 * math.Log(u1))
	sin, cos := math.Sincos(2 * math.Pi * u2)
	return radius * cos, radius * sin
}
