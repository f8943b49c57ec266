package nvshmem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/desync"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/cudalib/cudalibtest"
)

// The desync check on the fake one-PE library: the fingerprints the Go side
// hands to the library, the error it makes of a desync the library reports,
// the library's own words for it, and the comparison on the host for peers
// out of pointer reach. The check between real PEs runs in gpu_test.go
// (TestGPUDesync*).

// checking turns the desync check on for c as if it were one of npes PEs
// (the fake is a job of one, where the check is off).
func checking(c *Comm, npes int) {
	c.check, c.npes = true, npes
}

// callWords renders calls (each desync.Encode'd) as FAKE_SD_DESYNC wants them.
func callWords(calls ...desync.Call) string {
	pes := make([]string, len(calls))
	for i, c := range calls {
		w := c.Encode()
		pes[i] = fmt.Sprintf("%d,%d,%d,%d,%d", w[0], w[1], w[2], w[3], w[4])
	}
	return strings.Join(pes, ";")
}

// TestDesyncFingerprints: with the check on, every collective hands the
// library its fingerprint, numbered from 1, before it enqueues anything;
// a collective of no elements meets the peers in a barrier that carries it.
func TestDesyncFingerprints(t *testing.T) {
	c, _ := openFake(t)
	log := filepath.Join(t.TempDir(), "calls.log")
	t.Setenv("FAKE_SD_CALL_LOG", log)
	checking(c, 1)
	f32 := func(coll desync.Coll, red comm.Op, root, off, n int) desync.Call {
		return desync.Call{Op: coll, Red: red, Root: root, Kind: comm.Float32, Buf: 1, Off: off, N: n}
	}
	b, err := c.Alloc(comm.Float32, 64)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := c.Alloc(comm.BFloat16, 10)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		run  func() error
		call desync.Call
		ops  []string // what it enqueues after handing over its call
	}{
		{c.Barrier, desync.Call{Op: desync.Barrier}, []string{"barrier"}},
		{func() error { return c.AllReduce(b, 3, 30, comm.Mean) }, f32(desync.AllReduce, comm.Mean, 0, 3, 30), []string{"allreduce"}},
		{func() error { return c.Reduce(b2, 1, 5, comm.Max, 0) },
			desync.Call{Op: desync.Reduce, Red: comm.Max, Kind: comm.BFloat16, Buf: 2, Off: 1, N: 5}, []string{"reduce"}},
		{func() error { return c.Broadcast(b, 2, 7, 0) }, f32(desync.Broadcast, 0, 0, 2, 7), []string{"broadcast"}},
		{func() error { return c.ReduceScatter(b, 0, 64, comm.Sum) }, f32(desync.ReduceScatter, comm.Sum, 0, 0, 64), nil},
		{func() error { return c.AllGather(b, 0, 64) }, f32(desync.AllGather, 0, 0, 0, 64), nil},
		{func() error {
			r, err := c.IReduceScatter(b, 0, 64, 16, 40, comm.Sum)
			if err != nil {
				return err
			}
			return r.Wait()
		}, desync.Call{Op: desync.ReduceScatterPart, Red: comm.Sum, Sharding: desync.ShardingOf(0, 64), Kind: comm.Float32, Buf: 1, Off: 16, N: 24}, nil},
		{func() error {
			r, err := c.IAllReduce(b, 0, 8, comm.Sum)
			if err != nil {
				return err
			}
			return r.Wait()
		}, f32(desync.AllReduce, comm.Sum, 0, 0, 8), []string{"allreduce"}},
		{func() error { return c.AllReduceEnqueue(b, 5, 0, comm.Sum) }, f32(desync.AllReduce, comm.Sum, 0, 5, 0), []string{"barrier"}},
		{func() error { return c.Broadcast(b, 0, 0, 0) }, f32(desync.Broadcast, 0, 0, 0, 0), []string{"barrier"}},
		{func() error { _, err := c.TimeBarrier(0, 1); return err }, desync.Call{Op: desync.Barrier}, nil},
		{func() error { return c.Free(b2) }, desync.Call{Op: desync.Free}, []string{"allgather_u64"}},
		{c.Close, desync.Call{Op: desync.Close}, []string{"barrier"}},
	}
	os.Remove(log) // the allocations' lines: the steps' start here
	var want []string
	for i, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		s.call.Seq = uint64(i + 3) // after the two allocations
		w := s.call.Encode()
		want = append(want, fmt.Sprintf("call %d %d %d %d %d", w[0], w[1], w[2], w[3], w[4]))
		for _, op := range s.ops {
			want = append(want, "op "+op)
		}
	}
	got, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := strings.TrimSpace(string(got)), strings.Join(want, "\n"); g != w {
		t.Errorf("the library was told\n%s\nwant\n%s", g, w)
	}
}

// TestDesyncReported: a desync the library reports fails the collective
// with one line wrapping comm.ErrDesync, in desync.Check's words over the
// calls the library read back, and leaves the runtime unusable.
func TestDesyncReported(t *testing.T) {
	c, _ := openFake(t)
	b, err := c.Alloc(comm.Float32, 1024)
	if err != nil {
		t.Fatal(err)
	}
	checking(c, 2)
	t.Setenv("FAKE_SD_DESYNC", callWords(desync.Call{Seq: 1, Op: desync.Barrier}))
	err = c.AllReduce(b, 0, 1024, comm.Sum)
	want := "nvshmem: PE 0: allreduce: collective #1: PE 0 calls allreduce(sum, 4096 bytes: float32 [0, 1024) of buffer #1); " +
		"PE 1 calls barrier(): " + comm.ErrDesync.Error()
	if !errors.Is(err, comm.ErrDesync) || err.Error() != want {
		t.Fatalf("allreduce against a barrier:\n\t%v\nwant\n\t%s", err, want)
	}
	if err := c.Barrier(); !errors.Is(err, comm.ErrDesync) || !strings.Contains(err.Error(), "unusable after an earlier failure") {
		t.Fatalf("barrier after the desync: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close after the desync: %v", err)
	}
}

// TestDesyncSeenElsewhere: a desync of an enqueued collective that another
// wait saw first (the compute engine's, for a step replayed from a CUDA
// graph) is what the next collective of the Comm reports.
func TestDesyncSeenElsewhere(t *testing.T) {
	c, _ := openFake(t)
	b, err := c.Alloc(comm.Float32, 1024)
	if err != nil {
		t.Fatal(err)
	}
	checking(c, 2)
	t.Setenv("FAKE_SD_DESYNC", callWords(desync.Call{Seq: 1, Op: desync.Barrier}))
	if err := c.AllReduceEnqueue(b, 0, 1024, comm.Sum); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if _, err := c.lib.StreamQuery(); !errors.Is(err, cudalib.ErrDesync) {
		t.Fatalf("the other wait: %v, want the library's desync", err)
	}
	err = c.Barrier()
	want := "nvshmem: PE 0: barrier: collective #1: PE 0 calls allreduce(sum, 4096 bytes: float32 [0, 1024) of buffer #1); " +
		"PE 1 calls barrier(): " + comm.ErrDesync.Error()
	if !errors.Is(err, comm.ErrDesync) || err.Error() != want {
		t.Fatalf("the next barrier:\n\t%v\nwant\n\t%s", err, want)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close after the desync: %v", err)
	}
}

// TestDesyncLibraryWords: the library's own message of a desync (what a
// training step replayed from a CUDA graph shows, cuda/sd_desync.h) says
// what desync.Check says.
func TestDesyncLibraryWords(t *testing.T) {
	lib, err := cudalib.Load(cudalibtest.BuildFake(t))
	if err != nil {
		t.Fatal(err)
	}
	ar := desync.Call{Seq: 4, Op: desync.AllReduce, Red: comm.Sum, Kind: comm.Float32, Buf: 2, N: 10}
	short := ar
	short.N = 9
	bar := desync.Call{Seq: 4, Op: desync.Barrier}
	bf := desync.Call{Seq: 4, Op: desync.Reduce, Red: comm.Mean, Root: 3, Kind: comm.BFloat16, Buf: 7, Off: 5, N: 1 << 20}
	bcast := func(root int) desync.Call {
		return desync.Call{Seq: 4, Op: desync.Broadcast, Root: root, Kind: comm.Byte, Buf: 1, Off: 2, N: 3}
	}
	for _, calls := range [][]desync.Call{
		{ar, bar},
		{ar, short, ar, ar},
		{bar, ar, short},
		{bar, {Seq: 5, Op: desync.Barrier}},
		{bcast(0), bcast(1)},
		{bf, ar, {Seq: 4, Op: desync.Alloc}, {Seq: 4, Op: desync.Close}, {Seq: 4, Op: desync.Free},
			{Seq: 4, Op: desync.AllGather, Kind: comm.Uint64, Buf: 3, N: 2},
			{Seq: 4, Op: desync.ReduceScatter, Red: comm.Min, Kind: comm.Float32, Buf: 3, Off: 1, N: 2},
			{Seq: 4, Op: desync.ReduceScatterPart, Red: comm.Sum, Sharding: desync.ShardingOf(0, 64), Kind: comm.Float32, Buf: 3, Off: 16, N: 20}},
		{{Seq: 4, Op: desync.ReduceScatterPart, Red: comm.Sum, Sharding: 7, Kind: comm.Float32, Buf: 1, N: 20},
			{Seq: 4, Op: desync.ReduceScatterPart, Red: comm.Sum, Sharding: 0xfedcba98, Kind: comm.Float32, Buf: 1, N: 20}},
	} {
		check := desync.Check("X", calls)
		if check == nil {
			t.Fatalf("%v: desync.Check finds no desync", calls)
		}
		want := strings.TrimSuffix(strings.TrimPrefix(check.Error(), "X: "), ": "+comm.ErrDesync.Error())
		if err := lib.SetCall(calls[0].Encode()); err != nil {
			t.Fatal(err)
		}
		t.Setenv("FAKE_SD_DESYNC", callWords(calls[1:]...))
		_, err := lib.StreamQuery()
		var le *cudalib.Error
		if !errors.As(err, &le) || !errors.Is(err, cudalib.ErrDesync) {
			t.Fatalf("%v: the query returned %v, want a library error wrapping ErrDesync", calls, err)
		}
		const head, tail = "fake: stream: PE 0: ", ": PEs called different collectives (desync)"
		got, ok := strings.CutPrefix(le.Msg, head)
		if i := strings.Index(got, ": "); ok && i >= 0 {
			got = got[i+2:] // the operation's name
		}
		if got, ok = strings.CutSuffix(got, tail); !ok || got != want {
			t.Errorf("the library says\n\t%s\ndesync.Check says\n\t%s", le.Msg, want)
		}
	}
	if err := lib.SetCall([desync.Words]uint64{}); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.StreamQuery(); err != nil {
		t.Errorf("with the check off the library reported %v", err)
	}
}

// TestDesyncOnHost: with a peer out of pointer reach the calls are
// gathered and compared on the host before the collective: a match goes
// on, a mismatch fails as a desync the kernels found does; the enqueue-only
// calls, which must not wait, are not compared there.
func TestDesyncOnHost(t *testing.T) {
	c, _ := openFake(t)
	log := filepath.Join(t.TempDir(), "calls.log")
	t.Setenv("FAKE_SD_CALL_LOG", log)
	b, err := c.Alloc(comm.Float32, 1024)
	if err != nil {
		t.Fatal(err)
	}
	checking(c, 2)
	c.info.AllReachable = false
	ar := desync.Call{Seq: 1, Op: desync.AllReduce, Red: comm.Sum, Kind: comm.Float32, Buf: 1, N: 1024}
	t.Setenv("FAKE_SD_DESYNC", callWords(ar))
	if err := c.AllReduce(b, 0, 1024, comm.Sum); err != nil {
		t.Fatalf("allreduce that every PE calls: %v", err)
	}
	t.Setenv("FAKE_SD_DESYNC", callWords(desync.Call{Seq: 2, Op: desync.Barrier}))
	if err := c.AllReduceEnqueue(b, 0, 1024, comm.Sum); err != nil {
		t.Fatalf("enqueued allreduce (not compared on the host): %v", err)
	}
	short := ar
	short.Seq, short.N = 3, 1023
	t.Setenv("FAKE_SD_DESYNC", callWords(short))
	err = c.AllReduce(b, 0, 1024, comm.Sum)
	want := "nvshmem: PE 0: allreduce: collective #3: PE 0 calls allreduce(sum, 4096 bytes: float32 [0, 1024) of buffer #1); " +
		"PE 1 calls allreduce(sum, 4092 bytes: float32 [0, 1023) of buffer #1): " + comm.ErrDesync.Error()
	if !errors.Is(err, comm.ErrDesync) || err.Error() != want {
		t.Fatalf("allreduces of other lengths:\n\t%v\nwant\n\t%s", err, want)
	}
	if err := c.Barrier(); !errors.Is(err, comm.ErrDesync) {
		t.Fatalf("barrier after the desync: %v", err)
	}
	got, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "call ") {
		t.Errorf("the library was handed calls although its kernels do not compare them here:\n%s", got)
	}
}

// TestCheckAgreement: PEs that set SYMDDP_DESYNC_CHECK differently cannot
// open, each told which PE differs.
func TestCheckAgreement(t *testing.T) {
	on, off := uint64(checkTag|1), uint64(checkTag)
	if err := checkAgreement(1, true, []uint64{on, on, on}); err != nil {
		t.Fatalf("all on: %v", err)
	}
	if err := checkAgreement(0, false, []uint64{off, off}); err != nil {
		t.Fatalf("all off: %v", err)
	}
	err := checkAgreement(1, true, []uint64{on, on, off})
	want := "nvshmem: PE 1: the desync check is on here and off on PE 2 (set SYMDDP_DESYNC_CHECK alike for every PE)"
	if err == nil || err.Error() != want {
		t.Fatalf("PE 2 off: %v, want %s", err, want)
	}
	if err := checkAgreement(0, false, []uint64{off, 7}); err == nil {
		t.Fatal("a word that is no setting passed")
	}
}

// TestPlacesShared: PEs share a GPU when their host and device number are
// the same, and only then.
func TestPlacesShared(t *testing.T) {
	a0, a1, b0 := placeWord("node-a", 0), placeWord("node-a", 1), placeWord("node-b", 0)
	if a0 == a1 || a0 == b0 {
		t.Fatalf("place words of different GPUs collide: %x %x %x", a0, a1, b0)
	}
	for _, c := range []struct {
		places []uint64
		want   bool
	}{
		{[]uint64{a0}, false},
		{[]uint64{a0, a1, b0, placeWord("node-b", 1)}, false},
		{[]uint64{a0, a1, a0}, true},                     // two PEs on node-a's GPU 0
		{[]uint64{a0, b0, placeWord("node-b", 0)}, true}, // two on node-b's
	} {
		if got := placesShared(c.places); got != c.want {
			t.Errorf("placesShared(%x) = %v, want %v", c.places, got, c.want)
		}
	}
}
