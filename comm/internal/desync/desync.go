// Package desync holds the fingerprints with which the comm backends detect
// PEs that call different collectives: each collective a PE enters gets a
// Call (its number, operation, buffer and range), every PE's Call is made
// visible to the others at the collective's entry, and Check compares them.
// A mismatch is reported on every PE with the same one line, naming the PEs
// and their calls, instead of the hang or the corrupted data that two
// unmatched collectives give.
//
// The package only encodes, compares and describes; how the Calls travel
// (slots of the shm control area, an MPI allgather) is each backend's.
package desync

import (
	"fmt"
	"slices"
	"strings"

	"github.com/symddp/symddp/comm"
)

// Coll names a collective operation in a Call.
type Coll uint8

// The collectives. IAllReduce is AllReduce (started early); Alloc and Free
// carry no sizes here, because PEs that allocate different sizes get
// comm.ErrSizeMismatch from the allocation itself and stay usable.
// ReduceScatterPart is Sharder.IReduceScatter: its range is the part, and
// Sharding stands for the range whose shards the part is reduced onto.
const (
	Barrier Coll = iota + 1
	AllReduce
	Reduce
	Broadcast
	ReduceScatter
	AllGather
	Alloc
	Free
	Close
	ReduceScatterPart
)

var collNames = [...]string{
	Barrier: "barrier", AllReduce: "allreduce", Reduce: "reduce", Broadcast: "broadcast",
	ReduceScatter: "reducescatter", AllGather: "allgather", Alloc: "alloc", Free: "free", Close: "close",
	ReduceScatterPart: "reducescatter-part",
}

// String is the collective's name as the backends' errors spell it.
func (o Coll) String() string {
	if int(o) < len(collNames) && collNames[o] != "" {
		return collNames[o]
	}
	return fmt.Sprintf("collective %d", uint8(o))
}

// Call is one PE's fingerprint of one collective call. Two PEs are in the
// same collective exactly when their Calls are equal.
type Call struct {
	Seq  uint64    // 1 for the first collective after Open, then counting up
	Op   Coll      // which collective
	Red  comm.Op   // the reduction operator (reductions only)
	Root int       // the root PE (Reduce, Broadcast; ignored for the others)
	Kind comm.Kind // the buffer's kind (data collectives only)
	Buf  uint64    // the buffer's number: the how-manieth Alloc made it (data collectives only)
	Off  int       // the range [Off, Off+N) in elements
	N    int
	// Sharding is ShardingOf the range whose shards a ReduceScatterPart
	// reduces its part [Off, Off+N) onto (ignored for the others).
	Sharding uint32
}

// Words is the number of uint64 words of an encoded Call.
const Words = 5

// rooted reports whether the collective has a root PE.
func (o Coll) rooted() bool { return o == Reduce || o == Broadcast }

// ShardingOf is a 32-bit digest of the range [off, off+n) whose shards a
// part of a reduce-scatter is reduced onto. The five words of a call have
// room for the part's range but not for a second one; PEs that shard
// different ranges get different digests except by a 2^-32 chance.
func ShardingOf(off, n int) uint32 {
	h := mix64(uint64(off)) ^ uint64(n)
	return uint32(mix64(h) >> 32)
}

// mix64 is SplitMix64's finaliser.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Encode packs c into Words words (Seq first). Decode(c.Encode()) is c,
// except that Root is 0 unless the collective has one and Sharding is 0
// unless it is a ReduceScatterPart (the two share word 1's upper half).
func (c Call) Encode() [Words]uint64 {
	root := uint64(0)
	switch {
	case c.Op.rooted():
		root = uint64(uint32(c.Root))
	case c.Op == ReduceScatterPart:
		root = uint64(c.Sharding)
	}
	return [Words]uint64{
		c.Seq,
		uint64(c.Op) | uint64(c.Red)<<8 | uint64(c.Kind)<<16 | root<<32,
		c.Buf,
		uint64(c.Off),
		uint64(c.N),
	}
}

// Decode unpacks words written by Encode.
func Decode(w [Words]uint64) Call {
	c := Call{
		Seq:  w[0],
		Op:   Coll(w[1]),
		Red:  comm.Op(w[1] >> 8),
		Kind: comm.Kind(w[1] >> 16),
		Buf:  w[2],
		Off:  int(w[3]),
		N:    int(w[4]),
	}
	if c.Op == ReduceScatterPart {
		c.Sharding = uint32(w[1] >> 32)
	} else {
		c.Root = int(uint32(w[1] >> 32))
	}
	return c
}

// String describes the call as a user reads it in an error:
// "allreduce(sum, 4000 bytes: float32 [0, 1000) of buffer #2)".
func (c Call) String() string {
	var args []string
	if c.Red != 0 {
		args = append(args, c.Red.String())
	}
	if c.Op.rooted() {
		args = append(args, fmt.Sprintf("root %d", c.Root))
	}
	if c.Op == ReduceScatterPart {
		args = append(args, fmt.Sprintf("sharding %08x", c.Sharding))
	}
	if c.Kind != 0 {
		args = append(args, fmt.Sprintf("%d bytes: %s [%d, %d) of buffer #%d",
			c.N*c.Kind.Size(), c.Kind, c.Off, c.Off+c.N, c.Buf))
	}
	return c.Op.String() + "(" + strings.Join(args, ", ") + ")"
}

// Check compares the Calls of every PE (calls[p] is PE p's; Root counts
// only where the collective has one) and returns nil when they are all
// equal, else an error wrapping comm.ErrDesync that names
// every distinct call and the PEs that made it, PE 0's first. Every PE that
// compares the same Calls gets the same message; prefix (the backend and
// this PE, "shm: PE 1") starts it.
func Check(prefix string, calls []Call) error {
	if len(calls) == 0 {
		return nil
	}
	calls = slices.Clone(calls)
	same := true
	for i := range calls {
		calls[i] = Decode(calls[i].Encode())
		same = same && calls[i] == calls[0]
	}
	if same {
		return nil
	}
	// Group the PEs by call, in order of each call's first PE.
	var distinct []Call
	var pes [][]int
	for p, c := range calls {
		i := slices.Index(distinct, c)
		if i < 0 {
			distinct = append(distinct, c)
			pes = append(pes, nil)
			i = len(distinct) - 1
		}
		pes[i] = append(pes[i], p)
	}
	parts := make([]string, len(distinct))
	seqs := false
	for i, c := range distinct {
		verb := "calls"
		if len(pes[i]) > 1 {
			verb = "call"
		}
		parts[i] = fmt.Sprintf("%s %s %s", peList(pes[i]), verb, c)
		seqs = seqs || c.Seq != distinct[0].Seq
	}
	what := fmt.Sprintf("collective #%d", calls[0].Seq)
	if seqs {
		// Not expected while every PE checks every collective; say it
		// rather than hide it.
		for i, c := range distinct {
			parts[i] += fmt.Sprintf(" as its collective #%d", c.Seq)
		}
		what = "a collective"
	}
	return fmt.Errorf("%s: %s: %s: %w", prefix, what, strings.Join(parts, "; "), comm.ErrDesync)
}

// peList renders "PE 1" or "PEs 0, 2, 3".
func peList(pes []int) string {
	if len(pes) == 1 {
		return fmt.Sprintf("PE %d", pes[0])
	}
	s := make([]string, len(pes))
	for i, p := range pes {
		s[i] = fmt.Sprint(p)
	}
	return "PEs " + strings.Join(s, ", ")
}
