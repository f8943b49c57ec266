package shm

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations without FUTEX_PRIVATE_FLAG: the words live in a MAP_SHARED
// mapping and the waiters are other processes.
const (
	futexWait = 0 // FUTEX_WAIT
	futexWake = 1 // FUTEX_WAKE
)

// futexSleep blocks while *w == old, for at most d. It returns early on a
// wake-up, a signal, or when *w no longer holds old; callers re-check their
// condition in every case.
func futexSleep(w *atomic.Uint32, old uint32, d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWait, uintptr(old),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWakeAll wakes every process sleeping on w.
func futexWakeAll(w *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}

// schedYield gives this thread's CPU to another runnable thread, such as a
// peer PE when there are more PEs than CPUs.
func schedYield() {
	unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}
