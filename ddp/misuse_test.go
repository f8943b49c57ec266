package ddp_test

import (
	"testing"

	"github.com/symddp/symddp/ddp"
)

// panicOf runs f and returns what it panicked with (nil when it did not).
func panicOf(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestNewNilArgumentPanics: New with a nil argument panics at once naming
// it, not with a nil dereference somewhere inside.
func TestNewNilArgumentPanics(t *testing.T) {
	c, e, m, o := tinyParts(t)
	opts := ddp.Options{GlobalBatch: 8, LR: 1}
	for _, tc := range []struct {
		want string
		new  func()
	}{
		{"ddp.New: nil comm", func() { _, _ = ddp.New(nil, e, m, o, opts) }},
		{"ddp.New: nil engine", func() { _, _ = ddp.New(c, nil, m, o, opts) }},
		{"ddp.New: nil model", func() { _, _ = ddp.New(c, e, nil, o, opts) }},
		{"ddp.New: nil optimizer", func() { _, _ = ddp.New(c, e, m, nil, opts) }},
	} {
		if got := panicOf(tc.new); got != tc.want {
			t.Errorf("panic %v, want %q", got, tc.want)
		}
	}
}
