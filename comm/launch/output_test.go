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
