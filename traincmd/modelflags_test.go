package traincmd

import (
	"strings"
	"testing"
)

// TestModelOptRefusedForBuiltIns: --model-opt, which reaches only a model a
// program registers, is refused for a built-in model in one line naming
// the flags that size it, with exit 2 before any PE starts.
func TestModelOptRefusedForBuiltIns(t *testing.T) {
	const head = "train: --model-opt applies to models a program registers (models.Register, docs/LIBRARY.md), not to the built-in "
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "mlp", "--dataset", "synthetic", "--model-opt", "width=5"}, head + "mlp, sized with --hidden"},
		{[]string{"--model", "gpt-tiny", "--dataset", "synthetic", "--model-opt", "heads=2"},
			head + "gpt-tiny, sized with --layers, --heads, --width, --context and --vocab"},
		{[]string{"--model", "llama-tiny", "--dataset", "synthetic", "--model-opt", "heads=2"},
			head + "llama-tiny, sized with --layers, --heads, --kv-heads, --width, --ffn-hidden, --context, --vocab and --rope-theta"},
	} {
		if line, ok := usageRefusal(tc.args...); !ok || line != tc.want {
			t.Errorf("train %s: %q; want exit 2 and %q (and the --help pointer)", strings.Join(tc.args, " "), line, tc.want)
		}
	}
}
