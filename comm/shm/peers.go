package shm

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/symddp/symddp/comm"
)

// peerWatch tells whether the PEs of the job are still alive. After the join
// barrier it holds a pidfd per peer: a pidfd becomes readable when the process
// exits, even while it is an unreaped zombie, and it cannot be fooled by the
// reuse of a pid. Before that (or on kernels without pidfd_open) it falls back
// to kill(pid, 0).
type peerWatch struct {
	pidfd []int // -1: none
}

func (w *peerWatch) init(npes int) {
	w.pidfd = make([]int, npes)
	for i := range w.pidfd {
		w.pidfd[i] = -1
	}
}

// open takes a pidfd on every peer. A peer that is gone already is noticed
// by the next check.
func (w *peerWatch) open(c *Comm) {
	for q := range w.pidfd {
		if q == c.me {
			continue
		}
		if pid := int(c.seg.slot(q).pid.Load()); pid > 0 {
			if fd, err := unix.PidfdOpen(pid, 0); err == nil {
				w.pidfd[q] = fd
			}
		}
	}
}

func (w *peerWatch) close() {
	for q, fd := range w.pidfd {
		if fd >= 0 {
			unix.Close(fd)
			w.pidfd[q] = -1
		}
	}
}

// alive reports whether PE q's process is still running. A PE that has not
// joined yet (no pid) counts as alive: only the deadline can tell.
func (w *peerWatch) alive(c *Comm, q int) bool {
	if fd := w.pidfd[q]; fd >= 0 {
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds[:], 0)
		return err != nil || n == 0
	}
	pid := int(c.seg.slot(q).pid.Load())
	if pid <= 0 {
		return true
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// check returns an error wrapping comm.ErrPeerFailed when a PE that has not
// entered barrier e has exited or closed its runtime.
func (w *peerWatch) check(c *Comm, op string, e uint64) error {
	for q := 0; q < c.npes; q++ {
		s := c.seg.slot(q)
		if q == c.me || s.arrive.Load() >= e {
			continue
		}
		if s.state.Load() == stateClosed {
			return fmt.Errorf("shm: PE %d: %s: PE %d closed its runtime while the others wait for it: %w", c.me, op, q, comm.ErrPeerFailed)
		}
		if !w.alive(c, q) {
			return fmt.Errorf("shm: PE %d: %s: PE %d (pid %d) exited while the others wait for it: %w", c.me, op, q, s.pid.Load(), comm.ErrPeerFailed)
		}
	}
	return nil
}

// checkAll returns an error wrapping comm.ErrPeerFailed when any peer that
// has not closed its runtime has exited (WaitUntil does not know which peer
// will signal).
func (w *peerWatch) checkAll(c *Comm, op string) error {
	for q := 0; q < c.npes; q++ {
		if q == c.me || c.seg.slot(q).state.Load() == stateClosed {
			continue
		}
		if !w.alive(c, q) {
			return fmt.Errorf("shm: PE %d: %s: PE %d (pid %d) exited: %w", c.me, op, q, c.seg.slot(q).pid.Load(), comm.ErrPeerFailed)
		}
	}
	return nil
}
