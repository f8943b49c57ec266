//go:build mpi

package mpi

import (
	"errors"
	"fmt"
	"sync"

	"github.com/symddp/symddp/comm"
)

// IAllReduce starts AllReduce and returns at once. A goroutine of this Comm
// runs the queued requests one after another, in the order they were
// issued, each a blocking MPI_Allreduce under the MPI mutex, so that MPI
// makes progress while the caller computes; every synchronous collective
// first waits for the queue to drain, so the PEs see their collectives in
// the same order. In steady state (requests waited for and recycled) it
// does not allocate.
func (c *Comm) IAllReduce(b comm.Buffer, off, n int, op comm.Op) (comm.Request, error) {
	mb, err := c.reduceArgs("iallreduce", b, off, n, op, c.me)
	if err != nil {
		return nil, err
	}
	r := c.async.get()
	r.b, r.off, r.n, r.op = mb, off, n, op
	c.async.submit(r)
	return r, nil
}

// asyncQueue is the ordered queue of IAllReduce requests and the goroutine
// that serves it.
type asyncQueue struct {
	c     *Comm
	queue chan *request
	done  chan struct{} // closed when the goroutine has returned

	mu          sync.Mutex
	idle        sync.Cond // signalled when outstanding drops to zero
	outstanding int
	pool        []*request
}

// request is an IAllReduce in flight. It implements comm.Request.
type request struct {
	q      *asyncQueue
	b      *buffer
	off, n int
	op     comm.Op
	err    error
	fin    chan struct{} // one token when the operation is complete
	waited bool
}

func (a *asyncQueue) start(c *Comm) {
	a.c = c
	a.queue = make(chan *request, 64)
	a.done = make(chan struct{})
	a.idle.L = &a.mu
	go a.serve()
}

func (a *asyncQueue) serve() {
	defer close(a.done)
	for r := range a.queue {
		r.err = a.run(r)
		a.mu.Lock()
		a.outstanding--
		if a.outstanding == 0 {
			a.idle.Broadcast()
		}
		a.mu.Unlock()
		r.fin <- struct{}{}
	}
}

func (a *asyncQueue) run(r *request) error {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked("iallreduce"); err != nil {
		return err
	}
	return c.allReduceLocked("iallreduce", r.b, r.off, r.n, r.op)
}

// get takes a request from the pool.
func (a *asyncQueue) get() *request {
	a.mu.Lock()
	defer a.mu.Unlock()
	if k := len(a.pool); k > 0 {
		r := a.pool[k-1]
		a.pool = a.pool[:k-1]
		r.waited = false
		return r
	}
	return &request{q: a, fin: make(chan struct{}, 1)}
}

func (a *asyncQueue) submit(r *request) {
	a.mu.Lock()
	a.outstanding++
	a.mu.Unlock()
	a.queue <- r
}

// drain waits until every submitted request has run.
func (a *asyncQueue) drain() {
	a.mu.Lock()
	for a.outstanding > 0 {
		a.idle.Wait()
	}
	a.mu.Unlock()
}

// stop drains the queue and ends the goroutine.
func (a *asyncQueue) stop() {
	if a.queue == nil {
		return
	}
	a.drain()
	close(a.queue)
	<-a.done
	a.queue = nil
}

// Wait blocks until the allreduce is complete on this PE and returns its
// error. Call it once: the request is recycled by the next IAllReduce.
func (r *request) Wait() error {
	if r.waited {
		return fmt.Errorf("mpi: iallreduce: %w", errWaitedTwice)
	}
	<-r.fin
	err := r.err
	r.waited, r.b, r.err = true, nil, nil
	a := r.q
	a.mu.Lock()
	a.pool = append(a.pool, r)
	a.mu.Unlock()
	return err
}

var errWaitedTwice = errors.New("Wait called twice on one request")
