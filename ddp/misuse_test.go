package ddp_test

import (
	"context"
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

// TestTrainerUsedAfterClose: a second Close is a no-op, and a closed
// Trainer's collectives panic saying so instead of running on freed
// symmetric buffers.
func TestTrainerUsedAfterClose(t *testing.T) {
	c, _, _, _ := tinyParts(t)
	tr := newLocalTrainer(t, c, 16, ddp.Options{GlobalBatch: 8, LR: 0.1, MaxSteps: 2, Epochs: 1})
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("second Close = %v, want nil", err)
	}
	train, test := smallData(t)
	const want = "ddp: Trainer used after Close"
	for name, use := range map[string]func(){
		"Fit":           func() { _, _ = tr.Fit(context.Background(), train, test) },
		"Evaluate":      func() { _, _ = tr.Evaluate(test) },
		"CheckReplicas": func() { _, _ = tr.CheckReplicas() },
		"Params":        func() { _ = tr.Params() },
	} {
		if got := panicOf(use); got != want {
			t.Errorf("%s after Close: panic %v, want %q", name, got, want)
		}
	}
	if tr.NumParams() == 0 {
		t.Errorf("NumParams after Close = 0, want the model's count")
	}
}
