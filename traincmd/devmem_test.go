package traincmd

import (
	"strings"
	"testing"
)

// When the GPU has no room, train says how many rows a PE holds and which
// flags need less (a gpt model also its context).
func TestDeviceMemoryHint(t *testing.T) {
	o := &options{pes: 8, batch: 512, accumulate: 2}
	got := deviceMemoryHint(o)
	for _, want := range []string{"each PE holds 32 rows at once (--batch-size 512 over 8 PEs and --accumulate 2)", "a smaller --batch-size", "a larger --accumulate", "fewer PEs on one GPU"} {
		if !strings.Contains(got, want) {
			t.Errorf("hint %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "--context") {
		t.Errorf("hint for the mlp names --context: %q", got)
	}
	o.languageModel = true
	if got := deviceMemoryHint(o); !strings.Contains(got, "a shorter --context") {
		t.Errorf("hint for a gpt model %q lacks --context", got)
	}
}
