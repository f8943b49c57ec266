package launch

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
)

// ErrInterrupted is wrapped by Run's error when the job ended because the
// launcher was sent SIGINT or SIGTERM (Spec.ForwardSignals).
var ErrInterrupted = errors.New("launch: job interrupted")

// InterruptedError is Run's error when the job ended because the launcher
// was sent SIGINT or SIGTERM (Spec.ForwardSignals). It wraps ErrInterrupted
// and, when a PE failed as well, that PE's *PEError.
type InterruptedError struct {
	Signal  syscall.Signal
	Failure *PEError // nil when every PE stopped cleanly
}

// Error names the signal (and the failure).
func (e *InterruptedError) Error() string {
	if e.Failure != nil {
		return fmt.Sprintf("%v by %v: %v", ErrInterrupted, e.Signal, e.Failure)
	}
	return fmt.Sprintf("%v by %v", ErrInterrupted, e.Signal)
}

// Unwrap makes errors.Is(err, ErrInterrupted) true and errors.As find the
// failure.
func (e *InterruptedError) Unwrap() []error {
	if e.Failure != nil {
		return []error{ErrInterrupted, e.Failure}
	}
	return []error{ErrInterrupted}
}

// PEError is Run's error when a PE exited with a non-zero status or was
// killed: the PE that failed first, how, and why (the error it reported, or
// the last lines of its stderr). A PE that only failed because another one
// had (it died, or missed a deadline) is not the one named.
type PEError struct {
	PE       int            // the PE that failed
	ExitCode int            // the exit status; -1 when killed by a signal
	Signal   syscall.Signal // the signal that killed it; 0 if it exited
	// Reason is the error the PE reported before it exited
	// (Process.ReportFailure); "" when it reported none (a crash, a
	// signal, an exit without a report).
	Reason string
	// Stalled is true when PE did not end by itself but missed a deadline:
	// PE ReportedBy gave up waiting for it (and for Missing, when more than
	// one was missing), and Reason, ExitCode and Signal are ReportedBy's.
	Stalled    bool
	ReportedBy int
	Missing    []int
	// Stderr holds the last lines PE wrote to stderr, oldest first, when
	// they say what happened: when it reported no Reason, or stalled.
	Stderr []string
}

func newPEError(pe int, st *os.ProcessState, tail []string) *PEError {
	e := &PEError{PE: pe, ExitCode: -1, Stderr: tail}
	if st == nil { // it could not be waited for
		return e
	}
	e.ExitCode = st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal()
	}
	return e
}

// How says how the PE ended: "exit status 3" or "killed by signal 9
// (killed)" (for a stalled PE: how the PE that reported it ended).
func (e *PEError) How() string {
	if e.Signal != 0 {
		return fmt.Sprintf("killed by signal %d (%v)", int(e.Signal), e.Signal)
	}
	return fmt.Sprintf("exit status %d", e.ExitCode)
}

// ExitStatus is the status a launching command should exit with, by the
// shell's convention: the PE's exit status, or 128 + the signal's number.
func (e *PEError) ExitStatus() int {
	if e.Signal != 0 {
		return 128 + int(e.Signal)
	}
	if e.ExitCode <= 0 {
		return 1
	}
	return e.ExitCode
}

// oomHint follows a PE's SIGKILL in its PEError: the launcher's own
// SIGKILLs (a PE that outlived the grace after SIGTERM, a second interrupt)
// are not reported as failures, so this one came from elsewhere, and a PE
// that runs out of memory in a container, or on a host without swap, gets
// nothing else: the kernel's out-of-memory killer sends it, and the PE has
// no chance to say so.
const oomHint = "; not sent by the launcher: most often the kernel's out-of-memory killer, " +
	"when the host or the container (its memory limit) ran out of memory (dmesg says which process it chose)"

// outOfMemory follows the error of a PE whose Go runtime could not get
// memory ("fatal error: out of memory", then every goroutine's stack): it
// says so in words before the dump's tail.
const outOfMemory = ": the PE ran out of memory (an address-space limit, ulimit -v, or the host's or container's memory): " +
	"a smaller model, batch (--batch-size, --accumulate) or --heap-size, fewer PEs on the host, or a higher limit"

// Error is one summary line, then the PE's last stderr lines, indented:
// "PE 2 failed: <reason>", "PE 2 failed: killed by signal 9 (killed)", or
// "PE 2 missed the deadline (PE 3: <reason>)".
func (e *PEError) Error() string {
	var b strings.Builder
	switch {
	case e.Stalled:
		who := fmt.Sprintf("PE %d", e.PE)
		if len(e.Missing) > 1 {
			who = fmt.Sprintf("PEs %v", e.Missing)
		}
		fmt.Fprintf(&b, "%s stopped responding: PE %d gave up waiting: %s", who, e.ReportedBy, e.Reason)
	case e.Reason != "":
		fmt.Fprintf(&b, "PE %d failed: %s", e.PE, e.Reason)
	default:
		fmt.Fprintf(&b, "PE %d failed: %s", e.PE, e.How())
		if e.Signal == syscall.SIGKILL {
			b.WriteString(oomHint)
		}
		if slices.ContainsFunc(e.Stderr, func(l string) bool { return strings.HasPrefix(l, "fatal error: out of memory") }) {
			b.WriteString(outOfMemory)
		}
	}
	if len(e.Stderr) > 0 {
		b.WriteString("; its last lines on stderr:")
		for _, l := range e.Stderr {
			b.WriteString("\n    ")
			b.WriteString(l)
		}
	}
	return b.String()
}

// ExitCode maps Run's error to the status a launching command should exit
// with: 0 for nil, the failed PE's status (ExitStatus) for a *PEError, 128 +
// the signal after an interruption (130 for SIGINT, 143 for SIGTERM), 1
// otherwise.
func ExitCode(err error) int {
	var pe *PEError
	var intr *InterruptedError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &intr):
		return 128 + int(intr.Signal)
	case errors.Is(err, ErrInterrupted):
		return 130
	case errors.As(err, &pe):
		return pe.ExitStatus()
	}
	return 1
}
