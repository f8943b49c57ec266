// Package orderq runs a PE's asynchronous collectives (IAllReduce) one
// after another on one goroutine, in the order they were issued. Every PE
// issues its collectives in the same order, so running them in issue order
// keeps the PEs matched; a backend's synchronous collectives call Drain
// first for the same reason. Requests are recycled: in steady state (each
// request waited for once) nothing is allocated.
package orderq

import (
	"errors"
	"fmt"
	"sync"
)

// ErrWaitedTwice is returned by a second Wait on one request.
var ErrWaitedTwice = errors.New("Wait called twice on one request")

// Queue runs operations with arguments A. The zero value is ready for
// Start.
type Queue[A any] struct {
	name  string
	run   func(A) error
	queue chan *Request[A]
	done  chan struct{} // closed when the goroutine has returned

	mu          sync.Mutex
	idle        sync.Cond // signalled when outstanding drops to zero
	outstanding int
	pool        []*Request[A]
}

// Request is an operation in flight. It implements comm.Request.
type Request[A any] struct {
	q      *Queue[A]
	args   A
	err    error
	fin    chan struct{} // one token when the operation is complete
	waited bool
}

// Start starts the goroutine that runs each submitted operation with run;
// name prefixes its errors ("shm: iallreduce").
func (q *Queue[A]) Start(name string, run func(A) error) {
	q.name, q.run = name, run
	q.queue = make(chan *Request[A], 64)
	q.done = make(chan struct{})
	q.idle.L = &q.mu
	go q.serve()
}

func (q *Queue[A]) serve() {
	defer close(q.done)
	for r := range q.queue {
		r.err = q.run(r.args)
		q.mu.Lock()
		q.outstanding--
		if q.outstanding == 0 {
			q.idle.Broadcast()
		}
		q.mu.Unlock()
		r.fin <- struct{}{}
	}
}

// Submit queues an operation and returns its request.
func (q *Queue[A]) Submit(args A) *Request[A] {
	q.mu.Lock()
	var r *Request[A]
	if k := len(q.pool); k > 0 {
		r = q.pool[k-1]
		q.pool = q.pool[:k-1]
		r.waited = false
	} else {
		r = &Request[A]{q: q, fin: make(chan struct{}, 1)}
	}
	r.args = args
	q.outstanding++
	q.mu.Unlock()
	q.queue <- r
	return r
}

// Drain waits until every submitted operation has run.
func (q *Queue[A]) Drain() {
	if q.queue == nil {
		return
	}
	q.mu.Lock()
	for q.outstanding > 0 {
		q.idle.Wait()
	}
	q.mu.Unlock()
}

// Stop drains the queue and ends the goroutine. It does nothing on a queue
// that was never started or is stopped already.
func (q *Queue[A]) Stop() {
	if q.queue == nil {
		return
	}
	q.Drain()
	close(q.queue)
	<-q.done
	q.queue = nil
}

// Wait blocks until the operation is complete and returns its error. Call
// it once: the request is recycled by a later Submit.
func (r *Request[A]) Wait() error {
	if r.waited {
		return fmt.Errorf("%s: %w", r.q.name, ErrWaitedTwice)
	}
	<-r.fin
	err := r.err
	var zero A
	r.waited, r.args, r.err = true, zero, nil
	q := r.q
	q.mu.Lock()
	q.pool = append(q.pool, r)
	q.mu.Unlock()
	return err
}
