// Package stopsignal lets the commands that write files (tokenize, export)
// stop cleanly on SIGINT or SIGTERM: the first signal cancels a context,
// so that the command removes what it had half written, says so, and
// exits with 128 + the signal (130, 143) as train does; a second signal
// ends the process at once.
package stopsignal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Stop is the cause (context.Cause) of a context that a signal cancelled.
type Stop struct{ Signal syscall.Signal }

func (s Stop) Error() string { return "stopped by " + unix.SignalName(s.Signal) }

// ExitCode is the exit status of a command that the signal stopped.
func (s Stop) ExitCode() int { return 128 + int(s.Signal) }

// Notify returns a context that the first SIGINT or SIGTERM cancels, with
// Stop as its cause. A second signal writes "NAME: SIG again: stopping at
// once" to w and exits with 128 + that signal. stop releases the signals.
func Notify(parent context.Context, name string, w io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(Stop{s.(syscall.Signal)})
		case <-done:
			return
		}
		ExitOnSecond(w, name, ch, done)
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// ExitOnSecond waits, after a first signal, for a second one on ch and
// ends the process at once, writing "NAME: SIG again: stopping at once" to
// w and exiting with 128 + the signal; it returns when done closes first.
func ExitOnSecond(w io.Writer, name string, ch <-chan os.Signal, done <-chan struct{}) {
	select {
	case s := <-ch:
		n := s.(syscall.Signal)
		fmt.Fprintf(w, "%s: %s again: stopping at once\n", name, unix.SignalName(n))
		os.Exit(128 + int(n))
	case <-done:
	}
}

// Of returns what stopped ctx when a signal did (ok false otherwise).
func Of(ctx context.Context) (s Stop, ok bool) {
	ok = errors.As(context.Cause(ctx), &s)
	return s, ok
}

// Main is a command's main: it runs run on the process's arguments under
// Notify's context and exits with the status run returns.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) int) {
	ctx, stop := Notify(context.Background(), name, os.Stderr)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
