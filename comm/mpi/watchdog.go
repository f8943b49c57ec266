//go:build mpi

package mpi

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/internal/desync"
)

// What a watched MPI call waits for (the peer argument of Comm.call).
const (
	waitAll = -1 // a collective: every PE
	waitAny = -2 // some peers: completion of puts
)

// abortCode is the status MPI_Abort gives the job when a deadline passes.
const abortCode = 1

// watchdog ends the job when a blocking MPI call passes the deadline. MPI
// calls cannot be abandoned, so a PE whose peer never arrives would wait
// forever; the watchdog prints a comm.TimeoutError naming the operation
// (and, on PE 0, the PEs that had not arrived) and calls MPI_Abort, which
// makes mpirun stop every process of the job.
//
// PE 0 knows who is missing (see arrivals), so the others give it a head
// start before they fire themselves, to let its message be the one that
// shows: PE 1 after grace, the rest after twice grace, where grace is half
// the deadline, at most 5s.
type watchdog struct {
	c     *Comm
	grace time.Duration

	mu      sync.Mutex
	op      string
	peer    int
	armedAt time.Time // zero when nothing is armed

	quit chan struct{}
	done chan struct{}
}

func (w *watchdog) start(c *Comm) {
	w.c = c
	w.grace = min(c.timeout/2, 5*time.Second) * time.Duration(min(c.me, 2))
	w.quit, w.done = make(chan struct{}), make(chan struct{})
	period := min(max(c.timeout/20, 5*time.Millisecond), 250*time.Millisecond)
	go w.run(period)
}

// arm starts watching a call of op waiting for peer (a PE, waitAll or
// waitAny).
func (w *watchdog) arm(op string, peer int) {
	now := time.Now()
	w.mu.Lock()
	w.op, w.peer, w.armedAt = op, peer, now
	w.mu.Unlock()
}

// disarm ends watching the armed call.
func (w *watchdog) disarm() {
	w.mu.Lock()
	w.armedAt = time.Time{}
	w.mu.Unlock()
}

func (w *watchdog) stop() {
	if w.quit == nil {
		return
	}
	close(w.quit)
	<-w.done
	w.quit = nil
}

func (w *watchdog) run(period time.Duration) {
	defer close(w.done)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case now := <-t.C:
			w.mu.Lock()
			op, peer, start := w.op, w.peer, w.armedAt
			w.mu.Unlock()
			if !start.IsZero() && now.Sub(start) >= w.c.timeout+w.grace {
				w.fire(op, peer)
			}
		}
	}
}

// fire reports the passed deadline on stderr and aborts the job.
func (w *watchdog) fire(op string, peer int) {
	c := w.c
	e := &comm.TimeoutError{PE: c.me, Op: op, Deadline: c.timeout}
	var msg string
	switch {
	case peer >= 0:
		e.Missing = []int{peer}
		msg = e.Error()
	case peer == waitAny:
		msg = fmt.Sprintf("comm: PE %d: %s: deadline of %v passed waiting for puts to complete at their targets", c.me, op, c.timeout)
	default:
		missing, complete, note := c.arrivals.missing(c)
		e.Op = fmt.Sprintf("%s (collective #%d)", op, c.arrivals.cur.Load()>>8)
		e.Missing = missing
		switch {
		case complete:
			msg = e.Error() + note
		case len(missing) > 0:
			msg = e.Error() + note + " (and perhaps others: PE 0 would name them all)"
		default:
			msg = fmt.Sprintf("comm: PE %d: %s: deadline of %v passed waiting for the other PEs (PE 0 names those that did not arrive)",
				c.me, e.Op, c.timeout)
		}
	}
	fmt.Fprintf(os.Stderr, "symddp: %s; ending the job with MPI_Abort\n", msg)
	cAbort(abortCode)
}

// arrivals tells the watchdog which PEs reached a collective. It is a
// window of NPEs uint64 words: before entering a collective, every PE writes
// the number of collectives it has entered and which one this is (count<<8 |
// collective) into its word of PE 0's copy, and PE 0 writes its own into
// word 0 of PE 1's copy (an MPI_Put of the aligned word, complete locally,
// not waited for at the target). When a collective passes its deadline, PE 0
// reads its copy with plain atomic loads (no MPI call, which could block)
// and names the PEs whose count is behind its own or that wait in another
// collective; PE 1 can tell that about PE 0.
type arrivals struct {
	w   window
	cur atomic.Uint64 // this PE's word: count<<8 | collective
}

// collectiveIDs number the collectives for the arrival words.
var collectiveIDs = map[string]uint64{
	"alloc": 1, "free": 2, "barrier": 3, "allreduce": 4, "iallreduce": 4, "reduce": 5, "broadcast": 6, "close": 7,
	"reducescatter": 8, "allgather": 9, "ireducescatter": 10,
}

func collectiveName(id uint64) string {
	for name, v := range collectiveIDs {
		if v == id && name != "iallreduce" {
			return name
		}
	}
	return fmt.Sprintf("collective %d", id)
}

func (a *arrivals) open(c *Comm) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.call("open", waitAll, func() error {
		var err error
		if a.w, err = cWinAllocate(int64(8 * c.npes)); err != nil {
			return err
		}
		return cBarrier() // nobody writes a count before its target zeroed the window
	})
}

func (a *arrivals) close(c *Comm) error {
	return c.call("close", waitAll, func() error { return cWinFree(&a.w) })
}

// enter counts a collective op that this PE is about to enter, with
// fingerprint call, and checks the fingerprint against the peers' (see
// checkCall). The caller holds mu.
func (c *Comm) enter(op string, call desync.Call) error {
	a := &c.arrivals
	word := (a.cur.Load()>>8+1)<<8 | collectiveIDs[op]
	a.cur.Store(word)
	if c.npes == 1 {
		return nil
	}
	to, slot := 0, c.me
	if c.me == 0 {
		to, slot = 1, 0
	}
	if err := c.call(op, to, func() error { return cPublish(word, to, int64(8*slot), a.w) }); err != nil {
		return err
	}
	return c.checkCall(op, call)
}

// missing lists the PEs that have not reached this PE's current collective,
// as far as this PE can tell (all of them on PE 0), whether the list is
// complete, and a note on the PEs that wait in another collective. It makes
// no MPI call.
func (a *arrivals) missing(c *Comm) (pes []int, complete bool, note string) {
	if a.w.base == nil {
		return nil, false, ""
	}
	cur := a.cur.Load()
	words := unsafe.Slice((*uint64)(a.w.base), c.npes)
	var elsewhere []string
	look := func(q int, w uint64) {
		switch {
		case w>>8 < cur>>8:
			pes = append(pes, q)
		case w>>8 == cur>>8 && w&0xff != cur&0xff:
			pes = append(pes, q)
			elsewhere = append(elsewhere, fmt.Sprintf("PE %d is in %s", q, collectiveName(w&0xff)))
		}
	}
	switch c.me {
	case 0:
		for q := 1; q < c.npes; q++ {
			look(q, atomic.LoadUint64(&words[q]))
		}
		complete = true
	case 1:
		look(0, atomic.LoadUint64(&words[0]))
	}
	if len(elsewhere) > 0 {
		note = " (" + strings.Join(elsewhere, ", ") + ")"
	}
	return pes, complete, note
}
