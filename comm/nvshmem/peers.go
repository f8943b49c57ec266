package nvshmem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// checkEvery is how often a wait checks that its peers still run.
const checkEvery = 150 * time.Millisecond

// peerGrace is how long a wait goes on after it saw a peer go: a peer that
// passed the same barrier may close and exit before this PE's kernel has
// finished, so only work still unfinished after the grace is a failure.
const peerGrace = 2 * time.Second

// peerWatch tells whether the peers of a launcher job still run: every PE
// leaves its pid in the run directory (nvshmem.pe<N>.pid) and removes it when
// it closes; a waiting PE checks the peers' pids. Jobs without a run
// directory (mpirun) rely on the deadline.
type peerWatch struct {
	dir  string
	me   int
	npes int
	pids []int // 0: not seen yet
}

func pidFile(dir string, pe int) string {
	return filepath.Join(dir, fmt.Sprintf("nvshmem.pe%d.pid", pe))
}

func (w *peerWatch) init(b bootstrap) {
	if b.runDir == "" || b.npes < 2 {
		return
	}
	w.dir, w.me, w.npes = b.runDir, b.pe, b.npes
	w.pids = make([]int, b.npes)
	// Best effort: without the file peers fall back on the deadline.
	_ = os.WriteFile(pidFile(w.dir, w.me), []byte(strconv.Itoa(os.Getpid())), 0o644)
}

// gone returns a peer that has exited and how, or -1.
func (w *peerWatch) gone() (int, string) {
	if w.dir == "" {
		return -1, ""
	}
	for pe := 0; pe < w.npes; pe++ {
		if pe == w.me {
			continue
		}
		if data, err := os.ReadFile(pidFile(w.dir, pe)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 {
				w.pids[pe] = pid
			}
		} else if w.pids[pe] != 0 {
			return pe, fmt.Sprintf("(pid %d) has closed its runtime", w.pids[pe])
		}
		if pid := w.pids[pe]; pid != 0 {
			if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
				return pe, fmt.Sprintf("(pid %d) has exited", pid)
			}
		}
	}
	return -1, ""
}

// close removes this PE's pid file, and PE 0's unique-id file.
func (w *peerWatch) close() {
	if w.dir == "" {
		return
	}
	os.Remove(pidFile(w.dir, w.me))
	if w.me == 0 {
		os.Remove(filepath.Join(w.dir, UIDFile))
	}
	w.dir = ""
}
