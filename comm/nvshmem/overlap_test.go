package nvshmem

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/cudalib"
)

// TestCollectivesStreamFake: between CommFork and CommJoin the Enqueue
// collectives go to the library (each behind its arrival barrier, in the
// fake's log), every collective that waits on the host or records an event
// fails on the Go side before reaching the library, and the library's
// blocking entry points refuse too; after CommJoin everything works again.
// The trace's stamps come back in the order they were enqueued.
func TestCollectivesStreamFake(t *testing.T) {
	c, _ := openFake(t)
	log := filepath.Join(t.TempDir(), "calls.log")
	t.Setenv("FAKE_SD_CALL_LOG", log)
	b, err := c.Alloc(comm.Float32, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CommJoin(); err == nil || !strings.Contains(err.Error(), "not forked") {
		t.Fatalf("join without a fork: %v", err)
	}
	if err := c.TraceStamp(true, 0); !errors.Is(err, cudalib.ErrState) {
		t.Fatalf("a stamp on the collectives stream before the fork: %v, want ErrState", err)
	}
	if err := c.TraceStamp(false, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.CommFork(); err != nil {
		t.Fatal(err)
	}
	if !c.Forked() {
		t.Fatal("not forked after CommFork")
	}
	if err := c.AllReduceEnqueue(b, 32, 32, comm.Sum); err != nil {
		t.Fatalf("bucket allreduce while forked: %v", err)
	}
	if err := c.TraceStamp(true, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.CommFork(); err != nil {
		t.Fatalf("a second fork (the next bucket): %v", err)
	}
	if err := c.ReduceScatterPartEnqueue(b, 0, 64, 0, 32, comm.Sum); err != nil {
		t.Fatalf("part reduce-scatter while forked: %v", err)
	}
	if err := c.TraceStamp(false, 2); err != nil {
		t.Fatal(err)
	}
	blocking := map[string]func() error{
		"allreduce":      func() error { return c.AllReduce(b, 0, 64, comm.Sum) },
		"iallreduce":     func() error { _, err := c.IAllReduce(b, 0, 64, comm.Sum); return err },
		"reduce":         func() error { return c.Reduce(b, 0, 64, comm.Sum, 0) },
		"broadcast":      func() error { return c.Broadcast(b, 0, 64, 0) },
		"reducescatter":  func() error { return c.ReduceScatter(b, 0, 64, comm.Sum) },
		"ireducescatter": func() error { _, err := c.IReduceScatter(b, 0, 64, 0, 32, comm.Sum); return err },
		"allgather":      func() error { return c.AllGather(b, 0, 64) },
		"barrier":        c.Barrier,
		"alloc":          func() error { _, err := c.Alloc(comm.Float32, 8); return err },
		"free":           func() error { return c.Free(b) },
	}
	for name, f := range blocking {
		if err := f(); err == nil || !strings.Contains(err.Error(), name+": the collectives stream is forked") {
			t.Errorf("%s while forked: %v", name, err)
		}
	}
	if _, err := c.lib.Alloc(8); !errors.Is(err, cudalib.ErrState) {
		t.Errorf("the library's sd_alloc while forked: %v, want ErrState", err)
	}
	if err := c.CommJoin(); err != nil {
		t.Fatal(err)
	}
	if c.Forked() {
		t.Fatal("forked after CommJoin")
	}
	if err := c.AllReduce(b, 0, 64, comm.Sum); err != nil {
		t.Fatalf("allreduce after the join: %v", err)
	}
	stamps := make([]uint64, 3)
	if err := c.TraceRead(stamps); err != nil {
		t.Fatal(err)
	}
	if !(stamps[0] < stamps[1] && stamps[1] < stamps[2]) {
		t.Fatalf("stamps %v: want them in the order enqueued", stamps)
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if !strings.HasPrefix(l, "call ") && !strings.Contains(l, "allgather_u64") {
			ops = append(ops, l)
		}
	}
	want := []string{"fork", "op arrival", "op allreduce", "fork", "join", "op allreduce"}
	if strings.Join(ops, "|") != strings.Join(want, "|") {
		t.Fatalf("library calls %q, want %q (one PE: the part reduce-scatter launches nothing)", ops, want)
	}
}
