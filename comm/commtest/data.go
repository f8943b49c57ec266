package commtest

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/symddp/symddp/comm"
)

// Value is element i of PE pe's test data for seed: 24-bit mantissas scaled
// by 2^-8 .. 2^8, so that adding the PEs' values in another order usually
// rounds differently. Every PE can compute every peer's data.
func Value(seed uint64, pe, i int) float32 {
	h := mix(seed ^ uint64(pe)<<40 ^ uint64(i))
	mant := float32(int32(h>>32)>>8) / (1 << 23) // in [-1, 1), 24 bits
	exp := int(h%17) - 8
	return mant * float32(math.Ldexp(1, exp)) // exact: a power of two
}

// mix is SplitMix64's finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// values returns PE pe's data [off, off+n) for seed.
func values(seed uint64, pe, off, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = Value(seed, pe, off+i)
	}
	return out
}

// expected holds, per element, what the reductions of every PE's data must
// give.
type expected struct {
	fold []float32 // float32 sum in PE order 0..N-1 (a fixed-order Sum)
	ref  []float64 // float64 sum: the reference for other orders
	abs  []float64 // sum of magnitudes: scales the tolerance
	max  []float32
	min  []float32
}

// expect computes the reductions of elements [off, off+n) of every PE's data.
func expect(seed uint64, npes, off, n int) expected {
	e := expected{
		fold: make([]float32, n), ref: make([]float64, n), abs: make([]float64, n),
		max: make([]float32, n), min: make([]float32, n),
	}
	for i := range n {
		v := Value(seed, 0, off+i)
		fold, ref, abs, mx, mn := v, float64(v), math.Abs(float64(v)), v, v
		for pe := 1; pe < npes; pe++ {
			v = Value(seed, pe, off+i)
			fold += v
			ref += float64(v)
			abs += math.Abs(float64(v))
			mx, mn = max(mx, v), min(mn, v)
		}
		e.fold[i], e.ref[i], e.abs[i], e.max[i], e.min[i] = fold, ref, abs, mx, mn
	}
	return e
}

// checkReduced compares got (elements [off, off+n)) with the result of op:
// bit for bit when it is exact (Max, Min, and Sum and Mean of a fixed-order
// backend), within the error bound of an n-term float32 sum otherwise.
func checkReduced(t *testing.T, c comm.Comm, what string, op comm.Op, got []float32, e expected) {
	t.Helper()
	npes := c.NPEs()
	exact := fixedOrder(c)
	bad := 0
	for i, g := range got {
		var ok bool
		var want float64
		switch op {
		case comm.Max:
			ok, want = math.Float32bits(g) == math.Float32bits(e.max[i]), float64(e.max[i])
		case comm.Min:
			ok, want = math.Float32bits(g) == math.Float32bits(e.min[i]), float64(e.min[i])
		case comm.Sum, comm.Mean:
			w32, ref, abs := e.fold[i], e.ref[i], e.abs[i]
			if op == comm.Mean {
				w32, ref, abs = w32/float32(npes), ref/float64(npes), abs/float64(npes)
			}
			if exact {
				ok, want = math.Float32bits(g) == math.Float32bits(w32), float64(w32)
			} else {
				tol := float64(npes+1) * 0x1p-23 * abs
				ok, want = math.Abs(float64(g)-ref) <= tol, ref
			}
		}
		if !ok {
			if bad < 5 {
				t.Errorf("PE %d: %s %s: element %d = %v (bits %#08x), want %v", c.MyPE(), what, op, i, g, math.Float32bits(g), want)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("PE %d: %s %s: %d of %d elements wrong (fixed order: %v)", c.MyPE(), what, op, bad, len(got), exact)
	}
}

// checkEqual fails unless got and want hold the same bits.
func checkEqual(t *testing.T, c comm.Comm, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("PE %d: %s: %d elements, want %d", c.MyPE(), what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 5 {
				t.Errorf("PE %d: %s: element %d = %v, want %v", c.MyPE(), what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("PE %d: %s: %d of %d elements differ", c.MyPE(), what, bad, len(got))
	}
}

// hash is FNV-1a over the bits of xs.
func hash(xs []float32) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range xs {
		b := math.Float32bits(x)
		for k := 0; k < 4; k++ {
			h ^= uint64(byte(b >> (8 * k)))
			h *= 1099511628211
		}
	}
	return h
}

// sameOnAllPEs checks that every PE holds the same bits in xs: each PE puts
// the hash of its xs into slot MyPE of every PE's copy of a symmetric byte
// buffer, and every PE compares all the slots. It is collective.
func sameOnAllPEs(t *testing.T, c comm.Comm, what string, xs []float32) {
	t.Helper()
	npes, me := c.NPEs(), c.MyPE()
	hb := alloc(t, c, comm.Byte, 8*npes)
	defer free(t, c, hb)
	var mine [8]byte
	binary.LittleEndian.PutUint64(mine[:], hash(xs))
	for pe := 0; pe < npes; pe++ {
		must(t, c, "put hash", c.PutBytes(hb, 8*me, mine[:], pe))
	}
	must(t, c, "barrier", c.Barrier())
	all := make([]byte, 8*npes)
	must(t, c, "get hashes", c.GetBytes(all, hb, 0, me))
	for pe := 0; pe < npes; pe++ {
		if h := binary.LittleEndian.Uint64(all[8*pe:]); h != hash(xs) {
			t.Errorf("PE %d: %s: PE %d holds other bits (hash %#x, mine %#x)", me, what, pe, h, hash(xs))
		}
	}
	// Nobody may reuse the hash buffer before everyone has read it.
	must(t, c, "barrier", c.Barrier())
	if t.Failed() {
		t.FailNow()
	}
}
