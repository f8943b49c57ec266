package launch

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

func TestLineWriterPrefixesWholeLinesAndKeepsTheTail(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := newLineWriter(&mu, &out, "[pe 1] ", 3)
	for _, chunk := range []string{"a", "b\nc\n", "", "d\ne", "\nf"} {
		w.Write([]byte(chunk))
	}
	if got := out.String(); got != "[pe 1] ab\n[pe 1] c\n[pe 1] d\n[pe 1] e\n" {
		t.Errorf("forwarded %q", got)
	}
	w.Flush()
	if !strings.HasSuffix(out.String(), "[pe 1] f\n") {
		t.Errorf("Flush did not forward the last partial line: %q", out.String())
	}
	if got := strings.Join(w.Tail(), ","); got != "d,e,f" {
		t.Errorf("tail %q, want d,e,f", got)
	}
}

// A PE that panics writes the reason first and a stack trace after it,
// longer than the tail: the tail keeps the reason anyway, so that the
// launcher's error says why the PE failed, not only where.
func TestLineWriterTailKeepsThePanicLine(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := newLineWriter(&mu, &out, "[pe 0] ", 3)
	w.Write([]byte("starting\npanic: label 2, want -1 or 0..1\n\ngoroutine 1 [running]:\nmain.f()\n\tf.go:1\n"))
	if got := strings.Join(w.Tail(), ","); got != "panic: label 2, want -1 or 0..1,...,goroutine 1 [running]:,main.f(),\tf.go:1" {
		t.Errorf("tail %q, want the panic line, ... and the last 3 lines", got)
	}
	// still in the ring: not repeated
	w = newLineWriter(&mu, &out, "", 3)
	w.Write([]byte("fatal error: concurrent map writes\n\ngoroutine 1\n"))
	if got := strings.Join(w.Tail(), ","); got != "fatal error: concurrent map writes,,goroutine 1" {
		t.Errorf("tail %q, want the 3 lines once", got)
	}
	// a line that only mentions a panic is no crash report
	w = newLineWriter(&mu, &out, "", 1)
	w.Write([]byte("no panic: here\nb\n"))
	if got := strings.Join(w.Tail(), ","); got != "b" {
		t.Errorf("tail %q, want b", got)
	}
}
