package stopsignal

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"
)

func TestNotify(t *testing.T) {
	ctx, stop := Notify(context.Background(), "test", io.Discard)
	defer stop()
	if _, ok := Of(ctx); ok {
		t.Fatal("Of reports a signal before any")
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	s, ok := Of(ctx)
	if !ok || s.Signal != syscall.SIGTERM || s.ExitCode() != 143 || s.Error() != "stopped by SIGTERM" {
		t.Fatalf("Of = %v (%v), exit %d: want SIGTERM, 143", s, ok, s.ExitCode())
	}
}

func TestOfOtherCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, ok := Of(ctx); ok {
		t.Fatalf("Of(a context cancelled without a signal) = %v", s)
	}
}
