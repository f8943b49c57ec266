package traincmd

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/models"
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

// TestHeadsNameTheirFlags: query heads that do not divide the width, or
// are not a multiple of the key/value heads, are refused naming the two
// flags and which number is the preset's (--heads 1 on llama-tiny used to
// say "2 key/value heads do not divide the 1 query heads", gpt-tiny's
// --heads 3 "pick a width that is a multiple of the heads", naming no flag).
func TestHeadsNameTheirFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--heads", "1"}, "train: --heads 1 is not a multiple of --kv-heads 2 (llama-tiny's): give --heads a multiple of 2, or --kv-heads a divisor of 1"},
		{[]string{"--kv-heads", "3"}, "train: --heads 4 (llama-tiny's) is not a multiple of --kv-heads 3: give --heads a multiple of 3, or --kv-heads a divisor of 4"},
		{[]string{"--heads", "8", "--kv-heads", "3"}, "train: --heads 8 is not a multiple of --kv-heads 3: give --heads a multiple of 3, or --kv-heads a divisor of 8"},
		{[]string{"--heads", "3"}, "train: --heads 3 does not divide --width 128 (llama-tiny's): give --width a multiple of 3, or --heads a divisor of 128"},
		{[]string{"--width", "102"}, "train: --heads 4 (llama-tiny's) does not divide --width 102: give --width a multiple of 4, or --heads a divisor of 102"},
		{[]string{"--model", "gpt-tiny", "--heads", "3"}, "train: --heads 3 does not divide --width 128 (gpt-tiny's): give --width a multiple of 3, or --heads a divisor of 128"},
		{[]string{"--model", "gpt-tiny", "--heads", "6", "--width", "100"}, "train: --heads 6 does not divide --width 100: give --width a multiple of 6, or --heads a divisor of 100"},
	} {
		args := append([]string{"--model", "llama-tiny", "--dataset", "synthetic"}, tc.args...)
		if line, ok := usageRefusal(args...); !ok || line != tc.want {
			t.Errorf("train %s: %q; want exit 2 and %q (and the --help pointer)", strings.Join(args, " "), line, tc.want)
		}
	}
}

// TestRegisteredModelSizedByFlags: a registered language model whose
// factory needs a size flag to build (it refuses the empty Config) is a
// language model for train when the flag is given: it gets the
// language-model recipe instead of "--layers ... size a language model, not
// it"; a model that no settings build, or an unknown one, is reported where
// the model is built, not as a classifier given size flags.
func TestRegisteredModelSizedByFlags(t *testing.T) {
	models.Register("lm-needs-layers", func(cfg models.Config) (models.Model, error) {
		if cfg.Layers == 0 {
			return nil, errors.New("lm-needs-layers: give --layers")
		}
		if cfg.Layers > 2 {
			return nil, errors.New("lm-needs-layers: at most 2 layers")
		}
		return models.New("gpt-tiny", cfg)
	})
	if rc := resolved(t, "--model", "lm-needs-layers", "--layers", "1"); rc.Optimizer != "adamw" || rc.Batch != 16 {
		t.Errorf("train --model lm-needs-layers --layers 1: recipe %s with batch %d; want the language models' adamw and 16", rc.Optimizer, rc.Batch)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "lm-needs-layers", "--layers", "3"}, "train: model lm-needs-layers: lm-needs-layers: at most 2 layers"},
		{[]string{"--model", "no-such-model", "--layers", "3"}, `train: --model "no-such-model": unknown model`},
	} {
		if line, ok := usageRefusal(tc.args...); !ok || !strings.HasPrefix(line, tc.want) {
			t.Errorf("train %s: %q; want exit 2 and %q (and the --help pointer)", strings.Join(tc.args, " "), line, tc.want)
		}
	}
}

// TestProgramNamesTheCommand: a program of one's own that calls Main with
// Program set is named in its messages, and its --help pointer names it
// ("train: ... Run 'train --help'" told its users to run a command they
// do not have).
func TestProgramNamesTheCommand(t *testing.T) {
	defer func(p string) { Program = p }(Program)
	Program = "mytrain"
	var stdout, stderr bytes.Buffer
	code := run([]string{"--pes", "0"}, &stdout, &stderr)
	assert.Equal(t, 2, code)
	assert.Equal(t, "mytrain: --pes 0: need at least 1 PE\nRun 'mytrain --help' for the flags.\n", stderr.String())
	stdout.Reset()
	require.Equal(t, 0, run([]string{"--help"}, &stdout, &stderr))
	assert.True(t, strings.HasPrefix(stdout.String(), "mytrain: data-parallel training on a symmetric heap."), stdout.String())
}
