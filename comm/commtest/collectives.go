package commtest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/symddp/symddp/comm"
)

var ops = []comm.Op{comm.Sum, comm.Mean, comm.Max, comm.Min}

// AllReduce checks every operator on buffers of every length: the results
// against the float64 reference (exactly against the PE-order float32 sum
// for a fixed-order backend), and that every PE holds the same bits. For
// lengths above 8 it also reduces an inner range and checks that the
// elements outside it are untouched.
func AllReduce(t *testing.T, c comm.Comm, lengths []int) {
	npes, me := c.NPEs(), c.MyPE()
	for _, n := range lengths {
		seed := uint64(0xa11 + n)
		e := expect(seed, npes, 0, n)
		mine := values(seed, me, 0, n)
		b := alloc(t, c, comm.Float32, n)
		for _, op := range ops {
			what := fmt.Sprintf("allreduce n=%d", n)
			fill(t, c, b, 0, mine)
			must(t, c, what, c.AllReduce(b, 0, n, op))
			got := read(t, c, b, 0, n)
			checkReduced(t, c, what, op, got, e)
			sameOnAllPEs(t, c, fmt.Sprintf("%s %s", what, op), got)
		}
		if n > 8 {
			lo, hi := 3, n-5
			fill(t, c, b, 0, mine)
			must(t, c, "allreduce of an inner range", c.AllReduce(b, lo, hi-lo, comm.Sum))
			got := read(t, c, b, 0, n)
			checkEqual(t, c, "below an allreduced range", got[:lo], mine[:lo])
			checkEqual(t, c, "above an allreduced range", got[hi:], mine[hi:])
			checkReduced(t, c, "allreduce of an inner range", comm.Sum, got[lo:hi], expect(seed, npes, lo, hi-lo))
		}
		must(t, c, "barrier", c.Barrier())
		free(t, c, b)
	}
	// The data must be able to tell summation orders apart, or the exact
	// check above proves little.
	if npes >= 3 {
		e := expect(0xa11, npes, 0, 4096)
		differ := false
		for i := range e.fold {
			rev := Value(0xa11, npes-1, i)
			for pe := npes - 2; pe >= 0; pe-- {
				rev += Value(0xa11, pe, i)
			}
			differ = differ || rev != e.fold[i]
		}
		if !differ {
			t.Fatalf("test data: summing in reverse PE order never changes the rounding")
		}
	}
}

// IAllReduce checks several outstanding requests on disjoint ranges of one
// buffer, waited for out of order, and that a synchronous AllReduce issued
// while a request is in flight runs after it.
func IAllReduce(t *testing.T, c comm.Comm) {
	npes, me := c.NPEs(), c.MyPE()
	const n = 5000
	seed := uint64(0x1a11)
	e := expect(seed, npes, 0, n)
	mine := values(seed, me, 0, n)
	b := alloc(t, c, comm.Float32, n)
	defer free(t, c, b)
	ranges := []struct {
		lo, hi int
		op     comm.Op
	}{{0, 1000, comm.Sum}, {1000, 1001, comm.Max}, {1001, 3333, comm.Mean}, {3333, 4000, comm.Min}}
	fill(t, c, b, 0, mine)
	reqs := make([]comm.Request, len(ranges))
	for i, r := range ranges {
		var err error
		reqs[i], err = c.IAllReduce(b, r.lo, r.hi-r.lo, r.op)
		must(t, c, "iallreduce", err)
	}
	// A synchronous collective issued now must run after the requests.
	must(t, c, "allreduce after iallreduce", c.AllReduce(b, 4000, n-4000, comm.Sum))
	for i := len(reqs) - 1; i >= 0; i-- {
		must(t, c, "wait", reqs[i].Wait())
	}
	got := read(t, c, b, 0, n)
	for _, r := range ranges {
		sub := expected{fold: e.fold[r.lo:r.hi], ref: e.ref[r.lo:r.hi], abs: e.abs[r.lo:r.hi], max: e.max[r.lo:r.hi], min: e.min[r.lo:r.hi]}
		checkReduced(t, c, fmt.Sprintf("iallreduce [%d, %d)", r.lo, r.hi), r.op, got[r.lo:r.hi], sub)
	}
	checkReduced(t, c, "allreduce after iallreduce", comm.Sum, got[4000:], expect(seed, npes, 4000, n-4000))
	sameOnAllPEs(t, c, "iallreduce", got)
	// Many rounds through the queue keep the order.
	fill(t, c, b, 0, mine)
	for round := 0; round < 10; round++ {
		r, err := c.IAllReduce(b, 0, 16, comm.Max)
		must(t, c, "iallreduce", err)
		must(t, c, "wait", r.Wait())
	}
	got = read(t, c, b, 0, 16)
	checkReduced(t, c, "repeated iallreduce", comm.Max, got, expected{max: e.max[:16]})
	must(t, c, "barrier", c.Barrier())
}

// Reduce checks Sum and Mean to every root (to the first and last root only
// for lengths above 7): the root holds the reduction, the other PEs' copies
// are unchanged.
func Reduce(t *testing.T, c comm.Comm, lengths []int) {
	npes, me := c.NPEs(), c.MyPE()
	for _, n := range lengths {
		seed := uint64(0x3ed + n)
		e := expect(seed, npes, 0, n)
		mine := values(seed, me, 0, n)
		b := alloc(t, c, comm.Float32, n)
		for _, root := range roots(npes, n) {
			for _, op := range []comm.Op{comm.Sum, comm.Mean} {
				what := fmt.Sprintf("reduce n=%d to PE %d", n, root)
				fill(t, c, b, 0, mine)
				must(t, c, "barrier", c.Barrier())
				must(t, c, what, c.Reduce(b, 0, n, op, root))
				got := read(t, c, b, 0, n)
				if me == root {
					checkReduced(t, c, what, op, got, e)
				} else {
					checkEqual(t, c, what+": a non-root's copy", got, mine)
				}
			}
		}
		must(t, c, "barrier", c.Barrier())
		free(t, c, b)
	}
}

// Broadcast checks a float32 broadcast from every root (the first and last
// root only for lengths above 7), over the whole buffer and over an inner
// range, and a byte broadcast from every root.
func Broadcast(t *testing.T, c comm.Comm, lengths []int) {
	npes, me := c.NPEs(), c.MyPE()
	for _, n := range lengths {
		seed := uint64(0xb0 + n)
		mine := values(seed, me, 0, n)
		b := alloc(t, c, comm.Float32, n)
		for _, root := range roots(npes, n) {
			what := fmt.Sprintf("broadcast n=%d from PE %d", n, root)
			fill(t, c, b, 0, mine)
			must(t, c, "barrier", c.Barrier())
			must(t, c, what, c.Broadcast(b, 0, n, root))
			checkEqual(t, c, what, read(t, c, b, 0, n), values(seed, root, 0, n))
			if n > 2 {
				fill(t, c, b, 0, mine)
				must(t, c, "barrier", c.Barrier())
				must(t, c, what, c.Broadcast(b, 1, n-2, root))
				want := values(seed, root, 0, n)
				want[0], want[n-1] = mine[0], mine[n-1]
				checkEqual(t, c, what+" of [1, n-1)", read(t, c, b, 0, n), want)
			}
		}
		must(t, c, "barrier", c.Barrier())
		free(t, c, b)
	}
	bb := alloc(t, c, comm.Byte, 11)
	defer free(t, c, bb)
	pattern := func(pe int) []byte { return bytes.Repeat([]byte{byte(0x40 + pe)}, 11) }
	for root := 0; root < npes; root++ {
		must(t, c, "put bytes", c.PutBytes(bb, 0, pattern(me), me))
		must(t, c, "barrier", c.Barrier())
		must(t, c, "broadcast bytes", c.Broadcast(bb, 0, 11, root))
		got := make([]byte, 11)
		must(t, c, "get bytes", c.GetBytes(got, bb, 0, me))
		if !bytes.Equal(got, pattern(root)) {
			t.Fatalf("PE %d: byte broadcast from PE %d gave %v, want %v", me, root, got, pattern(root))
		}
	}
	must(t, c, "barrier", c.Barrier())
}

// roots are the roots to try for a buffer of n elements.
func roots(npes, n int) []int {
	if n <= 7 {
		all := make([]int, npes)
		for i := range all {
			all[i] = i
		}
		return all
	}
	if npes == 1 {
		return []int{0}
	}
	return []int{0, npes - 1}
}

// Shard checks comm.Shard's partition: the parts of every PE count tile the
// range in order, inner boundaries lie on ShardAlign, and a range moved by a
// multiple of ShardAlign is split the same way.
func Shard(t *testing.T) {
	for _, npes := range []int{1, 2, 3, 4, 7, 8} {
		for _, off := range []int{0, 5, 16, 48} {
			for _, n := range []int{0, 1, 15, 16, 17, 100, 4099} {
				next := off
				for p := range npes {
					lo, hi := comm.Shard(off, n, npes, p)
					if lo != next || hi < lo || hi > off+n {
						t.Fatalf("Shard(%d, %d, %d, %d) = [%d, %d), want it to start at %d and stay in the range", off, n, npes, p, lo, hi, next)
					}
					if p > 0 && lo < off+n && lo%comm.ShardAlign != 0 {
						t.Fatalf("Shard(%d, %d, %d, %d) starts at %d, not on a multiple of %d", off, n, npes, p, lo, comm.ShardAlign)
					}
					if mlo, mhi := comm.Shard(off+comm.ShardAlign*3, n, npes, p); mlo != lo+comm.ShardAlign*3 || mhi != hi+comm.ShardAlign*3 {
						t.Fatalf("Shard of a range moved by %d: [%d, %d), want [%d, %d)", comm.ShardAlign*3, mlo, mhi, lo+comm.ShardAlign*3, hi+comm.ShardAlign*3)
					}
					next = hi
				}
				if next != off+n {
					t.Fatalf("Shard(%d, %d, %d, ·) ends at %d, want %d", off, n, npes, next, off+n)
				}
			}
		}
	}
}

// ReduceScatter checks a comm.Sharder's ReduceScatter: every operator on
// every length and on an inner range; this PE's shard holds AllReduce's
// result (exactly the PE-order sum for a fixed-order backend) and the rest
// of its copy is untouched. Backends that are not Sharders skip it.
func ReduceScatter(t *testing.T, c comm.Comm, lengths []int) {
	s := sharder(t, c, "ReduceScatter")
	npes, me := c.NPEs(), c.MyPE()
	for _, n := range lengths {
		seed := uint64(0x5ca7 + n)
		mine := values(seed, me, 0, n)
		b := alloc(t, c, comm.Float32, n)
		ranges := [][2]int{{0, n}}
		if n > 40 {
			ranges = append(ranges, [2]int{3, n - 5})
		}
		for _, r := range ranges {
			off, m := r[0], r[1]-r[0]
			lo, hi := comm.Shard(off, m, npes, me)
			for _, op := range ops {
				what := fmt.Sprintf("reducescatter n=%d [%d, %d)", n, off, off+m)
				fill(t, c, b, 0, mine)
				must(t, c, what, s.ReduceScatter(b, off, m, op))
				got := read(t, c, b, 0, n)
				checkReduced(t, c, what, op, got[lo:hi], expect(seed, npes, lo, hi-lo))
				checkEqual(t, c, what+": below this PE's shard", got[:lo], mine[:lo])
				checkEqual(t, c, what+": above this PE's shard", got[hi:], mine[hi:])
			}
		}
		must(t, c, "barrier", c.Barrier())
		free(t, c, b)
	}
}

// IReduceScatter checks a comm.Sharder's IReduceScatter on every length,
// over the whole buffer and an inner range, each cut into parts as a
// backward pass cuts gradient buckets: parts that lie inside a shard, that
// straddle shard boundaries, that start or end on one, an empty part and
// the whole range as one part. The parts are issued from the last to the
// first, a synchronous collective after them, and waited for out of order.
// Afterwards this PE's shard holds the reduction (exactly the PE-order sum
// for a fixed-order backend) and, for a fixed-order backend, the very bits
// ReduceScatter leaves over the same data; the rest of its copy is
// untouched. Backends that are not Sharders skip it.
func IReduceScatter(t *testing.T, c comm.Comm, lengths []int) {
	s := sharder(t, c, "IReduceScatter")
	npes, me := c.NPEs(), c.MyPE()
	x := alloc(t, c, comm.Float32, 16)
	defer free(t, c, x)
	for _, n := range lengths {
		seed := uint64(0x1d5c + n)
		mine := values(seed, me, 0, n)
		b := alloc(t, c, comm.Float32, n)
		whole := alloc(t, c, comm.Float32, n)
		ranges := [][2]int{{0, n}}
		if n > 40 {
			ranges = append(ranges, [2]int{3, n - 5})
		}
		for _, r := range ranges {
			off, m := r[0], r[1]-r[0]
			lo, hi := comm.Shard(off, m, npes, me)
			for _, parts := range [][][2]int{{{off, off + m}}, partsOf(off, m, npes)} {
				for _, op := range ops {
					what := fmt.Sprintf("ireducescatter n=%d [%d, %d) in %d parts", n, off, off+m, len(parts))
					fill(t, c, b, 0, mine)
					fill(t, c, whole, 0, mine)
					fill(t, c, x, 0, values(seed, me, 0, 16))
					must(t, c, "reducescatter", s.ReduceScatter(whole, off, m, op))
					reqs := make([]comm.Request, len(parts))
					for i := len(parts) - 1; i >= 0; i-- {
						var err error
						reqs[i], err = s.IReduceScatter(b, off, m, parts[i][0], parts[i][1], op)
						must(t, c, what, err)
					}
					// A synchronous collective issued now runs after the parts.
					must(t, c, "allreduce after ireducescatter", c.AllReduce(x, 0, 16, comm.Max))
					for _, first := range []int{0, 1} { // evens first, then odds
						for i := first; i < len(reqs); i += 2 {
							must(t, c, "wait", reqs[i].Wait())
						}
					}
					got := read(t, c, b, 0, n)
					checkReduced(t, c, what, op, got[lo:hi], expect(seed, npes, lo, hi-lo))
					if fixedOrder(c) {
						checkEqual(t, c, what+": against reducescatter", got[lo:hi], read(t, c, whole, lo, hi-lo))
					}
					checkEqual(t, c, what+": below this PE's shard", got[:lo], mine[:lo])
					checkEqual(t, c, what+": above this PE's shard", got[hi:], mine[hi:])
					checkReduced(t, c, "allreduce after ireducescatter", comm.Max, read(t, c, x, 0, 16), expect(seed, npes, 0, 16))
				}
			}
		}
		must(t, c, "barrier", c.Barrier())
		free(t, c, whole)
		free(t, c, b)
	}
}

// partsOf cuts [off, off+n) into consecutive parts whose bounds fall on
// and beside the shard boundaries of npes PEs, inside shards, and next to
// the ends, with one empty part.
func partsOf(off, n, npes int) [][2]int {
	cuts := []int{off, off + n, off + n/7, off + n - 1, off + 1}
	for p := 1; p < npes; p++ {
		lo, _ := comm.Shard(off, n, npes, p)
		cuts = append(cuts, lo, lo+1, lo-3, lo+n/(3*npes))
	}
	slices.Sort(cuts)
	var parts [][2]int
	prev := off
	for _, k := range cuts {
		if k < prev || k > off+n {
			continue
		}
		if k == prev && len(parts) > 0 {
			continue
		}
		parts = append(parts, [2]int{prev, k}) // the first is empty: [off, off)
		prev = k
	}
	return parts
}

// AllGather checks a comm.Sharder's AllGather on Float32 and Byte buffers:
// afterwards every PE's copy holds, in each PE's shard, that PE's data, and
// outside the gathered range its own. Backends that are not Sharders skip
// it.
func AllGather(t *testing.T, c comm.Comm, lengths []int) {
	s := sharder(t, c, "AllGather")
	npes, me := c.NPEs(), c.MyPE()
	for _, n := range lengths {
		seed := uint64(0x9a7 + n)
		b := alloc(t, c, comm.Float32, n)
		off, m := 0, n
		if n > 40 {
			off, m = 3, n-8
		}
		fill(t, c, b, 0, values(seed, me, 0, n))
		must(t, c, "allgather", s.AllGather(b, off, m))
		got := read(t, c, b, 0, n)
		want := values(seed, me, 0, n)
		for p := range npes {
			lo, hi := comm.Shard(off, m, npes, p)
			copy(want[lo:hi], values(seed, p, 0, n)[lo:hi])
		}
		checkEqual(t, c, fmt.Sprintf("allgather n=%d [%d, %d)", n, off, off+m), got, want)
		sameOnAllPEs(t, c, "allgather", got[off:off+m])
		must(t, c, "barrier", c.Barrier())
		free(t, c, b)
	}
	// Bytes: PE p's shard of a byte buffer holds byte p+1.
	const nb = 1000
	bb := alloc(t, c, comm.Byte, nb)
	local := bytes.Repeat([]byte{byte(me + 1)}, nb)
	must(t, c, "put bytes", c.PutBytes(bb, 0, local, me))
	must(t, c, "barrier", c.Barrier())
	must(t, c, "allgather bytes", s.AllGather(bb, 0, nb))
	gotb := make([]byte, nb)
	must(t, c, "get bytes", c.GetBytes(gotb, bb, 0, me))
	for p := range npes {
		lo, hi := comm.Shard(0, nb, npes, p)
		if !bytes.Equal(gotb[lo:hi], bytes.Repeat([]byte{byte(p + 1)}, hi-lo)) {
			t.Fatalf("PE %d: allgather of bytes: shard of PE %d [%d, %d) = %v..., want %d", me, p, lo, hi, gotb[lo:min(hi, lo+8)], p+1)
		}
	}
	must(t, c, "barrier", c.Barrier())
	free(t, c, bb)
}

// sharder returns c as a comm.Sharder, or skips the test.
func sharder(t *testing.T, c comm.Comm, op string) comm.Sharder {
	s, ok := c.(comm.Sharder)
	if !ok {
		t.Skipf("backend %s has no %s (not a comm.Sharder)", c.Backend(), op)
	}
	return s
}
