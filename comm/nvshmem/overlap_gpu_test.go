package nvshmem

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
)

// TestGPUCollectivesStream reduces a buffer bucket by bucket on the
// collectives stream (CommFork before each bucket, CommJoin at the end), the
// PEs arriving at each bucket at different times (PE p's host waits p
// milliseconds before it), and checks against one collective over the whole
// range, bit for bit: the allreduce of every bucket against the allreduce
// (float32 and bfloat16), and the reduce-scatter of every bucket's part
// (ReduceScatterPartEnqueue) against the reduce-scatter, on every PE count
// of SYMDDP_GPU_PES. Three rounds each, so that the epochs of the arrival
// barriers and of the kernels on both streams stay in step; the trace's
// stamps on the two streams come back in the order the streams' ordering
// implies.
func TestGPUCollectivesStream(t *testing.T) {
	kernelJobs(t, bucketChecks, func(*testing.T, *Comm) {})
}

// bucketChecks is TestGPUCollectivesStream on one PE for kind.
func bucketChecks(t *testing.T, c *Comm, kind comm.Kind) {
	const total = 3*65536 + 1029
	// bucket boundaries, from the end of the range as backward reports them:
	// uneven sizes, off 16-byte boundaries, one shorter than the PE count
	bounds := []int{total, total - 3, 150001, 65541, 4097, 5, 0}
	mine, b := seededBuffer(t, c, kind, 0xb0c+uint64(kind), total)
	putBits(t, c, b, mine)
	if err := c.AllReduce(b, 0, total, comm.Sum); err != nil {
		t.Fatal(err)
	}
	reduced := getBits(t, c, b)
	skew := func() { time.Sleep(time.Duration(c.me) * time.Millisecond) }
	for round := range 3 {
		for _, sharded := range []bool{false, true} {
			what := fmt.Sprintf("PE %d of %d, %s, round %d, sharded %v", c.me, c.npes, kind, round, sharded)
			putBits(t, c, b, mine)
			if err := c.TraceStamp(false, 0); err != nil {
				t.Fatal(err)
			}
			for k := 0; k+1 < len(bounds); k++ {
				skew()
				if err := c.CommFork(); err != nil {
					t.Fatalf("%s: fork: %v", what, err)
				}
				if k == 0 {
					if err := c.TraceStamp(true, 1); err != nil {
						t.Fatal(err)
					}
				}
				lo, hi := bounds[k+1], bounds[k]
				var err error
				if sharded {
					err = c.ReduceScatterPartEnqueue(b, 0, total, lo, hi, comm.Sum)
				} else {
					err = c.AllReduceEnqueue(b, lo, hi-lo, comm.Sum)
				}
				if err != nil {
					t.Fatalf("%s: bucket [%d, %d): %v", what, lo, hi, err)
				}
			}
			if err := c.CommJoin(); err != nil {
				t.Fatalf("%s: join: %v", what, err)
			}
			if err := c.TraceStamp(false, 2); err != nil {
				t.Fatal(err)
			}
			if err := c.Barrier(); err != nil {
				t.Fatalf("%s: barrier after the join: %v", what, err)
			}
			want := reduced
			if sharded {
				lo, hi := comm.Shard(0, total, c.npes, c.me)
				want = slices.Clone(mine)
				copy(want[lo:hi], reduced[lo:hi])
			}
			if d := firstDiff(getBits(t, c, b), want); d != "" {
				t.Fatalf("%s: buckets against one collective: %s", what, d)
			}
			st := make([]uint64, 3)
			if err := c.TraceRead(st); err != nil {
				t.Fatal(err)
			}
			if !(st[0] <= st[1] && st[1] <= st[2]) {
				t.Fatalf("%s: stamps %v: the collectives stream ran before its fork or after the join", what, st)
			}
		}
	}
	if err := c.Free(b); err != nil {
		t.Fatal(err)
	}
}
