package desync

import (
	"errors"
	"testing"

	"github.com/symddp/symddp/comm"
)

func TestEncodeDecode(t *testing.T) {
	for _, c := range []Call{
		{Seq: 1, Op: Barrier},
		{Seq: 7, Op: AllReduce, Red: comm.Mean, Kind: comm.Float32, Buf: 3, Off: 16, N: 1 << 30},
		{Seq: 1 << 40, Op: Broadcast, Root: 4095, Kind: comm.Byte, Buf: 1, N: 5},
		{Seq: 2, Op: Reduce, Red: comm.Max, Root: 0, Kind: comm.Float32, Buf: 2, Off: 1, N: 2},
		{Seq: 9, Op: ReduceScatterPart, Red: comm.Sum, Sharding: ShardingOf(0, 1<<33), Kind: comm.Float32, Buf: 4, Off: 100, N: 50},
	} {
		if got := Decode(c.Encode()); got != c {
			t.Errorf("Decode(Encode(%+v)) = %+v", c, got)
		}
	}
	// A root means nothing to an allreduce.
	a := Call{Seq: 1, Op: AllReduce, Root: 3}
	if a.Encode() != (Call{Seq: 1, Op: AllReduce}).Encode() {
		t.Errorf("the root of an allreduce changes its encoding")
	}
	// Nor does a sharding to anything but a part of a reduce-scatter.
	rs := Call{Seq: 1, Op: ReduceScatter, Sharding: 5}
	if rs.Encode() != (Call{Seq: 1, Op: ReduceScatter}).Encode() {
		t.Errorf("the sharding of a reducescatter changes its encoding")
	}
}

// TestShardingOf: the digests of ranges that differ in start or length
// differ (for these), and a digest depends on nothing else.
func TestShardingOf(t *testing.T) {
	seen := map[uint32][2]int{}
	for _, off := range []int{0, 1, 3, 16, 1 << 20} {
		for _, n := range []int{0, 1, 2, 100, 1<<20 + 3, 1 << 40} {
			d := ShardingOf(off, n)
			if prev, dup := seen[d]; dup {
				t.Errorf("ShardingOf(%d, %d) = ShardingOf(%d, %d) = %08x", off, n, prev[0], prev[1], d)
			}
			seen[d] = [2]int{off, n}
			if ShardingOf(off, n) != d {
				t.Errorf("ShardingOf(%d, %d) changes between calls", off, n)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	ar := Call{Seq: 4, Op: AllReduce, Red: comm.Sum, Kind: comm.Float32, Buf: 2, N: 10}
	if err := Check("shm: PE 0", []Call{ar, ar, ar}); err != nil {
		t.Fatalf("equal calls: %v", err)
	}
	if err := Check("shm: PE 0", []Call{{Seq: 1, Op: Barrier, Root: 1}, {Seq: 1, Op: Barrier, Root: 2}}); err != nil {
		t.Errorf("barriers that differ in an unused root: %v", err)
	}
	short := ar
	short.N = 9
	bar := Call{Seq: 4, Op: Barrier}
	for _, tc := range []struct {
		calls []Call
		want  string
	}{
		{[]Call{ar, bar}, "shm: PE 0: collective #4: PE 0 calls allreduce(sum, 40 bytes: float32 [0, 10) of buffer #2); PE 1 calls barrier()"},
		{[]Call{ar, short, ar, ar}, "shm: PE 0: collective #4: PEs 0, 2, 3 call allreduce(sum, 40 bytes: float32 [0, 10) of buffer #2); PE 1 calls allreduce(sum, 36 bytes: float32 [0, 9) of buffer #2)"},
		{[]Call{bar, ar, short}, "shm: PE 0: collective #4: PE 0 calls barrier(); PE 1 calls allreduce(sum, 40 bytes: float32 [0, 10) of buffer #2); PE 2 calls allreduce(sum, 36 bytes: float32 [0, 9) of buffer #2)"},
		{[]Call{bar, {Seq: 5, Op: Barrier}}, "shm: PE 0: a collective: PE 0 calls barrier() as its collective #4; PE 1 calls barrier() as its collective #5"},
		{[]Call{{Seq: 1, Op: Broadcast, Root: 0, Kind: comm.Byte, Buf: 1, N: 3}, {Seq: 1, Op: Broadcast, Root: 1, Kind: comm.Byte, Buf: 1, N: 3}},
			"shm: PE 0: collective #1: PE 0 calls broadcast(root 0, 3 bytes: byte [0, 3) of buffer #1); PE 1 calls broadcast(root 1, 3 bytes: byte [0, 3) of buffer #1)"},
		{[]Call{{Seq: 2, Op: ReduceScatterPart, Red: comm.Sum, Sharding: 0xbeef, Kind: comm.Float32, Buf: 1, Off: 16, N: 8}, {Seq: 2, Op: ReduceScatterPart, Red: comm.Sum, Sharding: 0xf00d, Kind: comm.Float32, Buf: 1, Off: 16, N: 8}},
			"shm: PE 0: collective #2: PE 0 calls reducescatter-part(sum, sharding 0000beef, 32 bytes: float32 [16, 24) of buffer #1); PE 1 calls reducescatter-part(sum, sharding 0000f00d, 32 bytes: float32 [16, 24) of buffer #1)"},
	} {
		err := Check("shm: PE 0", tc.calls)
		if !errors.Is(err, comm.ErrDesync) {
			t.Errorf("%v: got %v, want an error wrapping ErrDesync", tc.calls, err)
			continue
		}
		if want := tc.want + ": " + comm.ErrDesync.Error(); err.Error() != want {
			t.Errorf("got  %s\nwant %s", err, want)
		}
	}
}
