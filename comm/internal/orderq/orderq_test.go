package orderq

import (
	"errors"
	"sync"
	"testing"
)

// TestRunsInOrder: operations run one after another in submission order,
// their errors reach Wait, and Drain waits for all of them.
func TestRunsInOrder(t *testing.T) {
	var q Queue[int]
	var mu sync.Mutex
	var seen []int
	boom := errors.New("boom")
	q.Start("test", func(i int) error {
		mu.Lock()
		seen = append(seen, i)
		mu.Unlock()
		if i == 3 {
			return boom
		}
		return nil
	})
	defer q.Stop()
	var reqs []*Request[int]
	for i := 0; i < 10; i++ {
		reqs = append(reqs, q.Submit(i))
	}
	q.Drain()
	mu.Lock()
	for i, v := range seen {
		if v != i {
			t.Fatalf("ran %v, want 0..9 in order", seen)
		}
	}
	if len(seen) != 10 {
		t.Fatalf("ran %d operations after Drain, want 10", len(seen))
	}
	mu.Unlock()
	for i, r := range reqs {
		if err := r.Wait(); (i == 3) != errors.Is(err, boom) {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if err := reqs[0].Wait(); !errors.Is(err, ErrWaitedTwice) {
		t.Fatalf("second Wait: %v", err)
	}
}

// TestRecycles: in steady state Submit and Wait allocate nothing.
func TestRecycles(t *testing.T) {
	var q Queue[int]
	q.Start("test", func(int) error { return nil })
	defer q.Stop()
	q.Submit(0).Wait()
	if n := testing.AllocsPerRun(100, func() { q.Submit(1).Wait() }); n != 0 {
		t.Fatalf("%v allocations per Submit+Wait, want 0", n)
	}
}

// TestStopTwice: Stop on a stopped or never-started queue does nothing.
func TestStopTwice(t *testing.T) {
	var never Queue[int]
	never.Stop()
	never.Drain()
	var q Queue[int]
	q.Start("test", func(int) error { return nil })
	q.Stop()
	q.Stop()
}
