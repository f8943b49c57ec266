package launch

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// ErrInterrupted is wrapped by Run's error when the job ended because the
// launcher was sent SIGINT or SIGTERM (Spec.ForwardSignals).
var ErrInterrupted = errors.New("launch: job interrupted")

// PEError is Run's error when a PE exited with a non-zero status or was
// killed: the first PE to fail, how, and the last lines of its stderr.
type PEError struct {
	PE       int            // the PE that failed
	ExitCode int            // the exit status; -1 when killed by a signal
	Signal   syscall.Signal // the signal that killed it; 0 if it exited
	Stderr   []string       // the last lines it wrote to stderr, oldest first
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

// How says how the PE ended: "exit status 3" or "killed by signal 9 (killed)".
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

// Error is one summary line, then the PE's last stderr lines, indented.
func (e *PEError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "PE %d failed: %s", e.PE, e.How())
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
// with: 0 for nil, the failed PE's status (ExitStatus) for a *PEError, 130
// after an interruption, 1 otherwise.
func ExitCode(err error) int {
	var pe *PEError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrInterrupted):
		return 130
	case errors.As(err, &pe):
		return pe.ExitStatus()
	}
	return 1
}
