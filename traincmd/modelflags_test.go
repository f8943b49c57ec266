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

// TestSizeFlagsTheModelIgnores: a registered language model whose factory
// keeps a size of its own where a flag gives one is refused naming the
// flag, what the model was built with and the Config field it does not
// read (it trained its own shape without a word); the built-in models,
// which read every size flag they take, are built as the flags say.
func TestSizeFlagsTheModelIgnores(t *testing.T) {
	models.Register("lm-fixed-layers", func(cfg models.Config) (models.Model, error) {
		cfg.Layers = 2 // keeps its own depth
		return models.New("gpt-tiny", cfg)
	})
	models.Register("lm-fixed-context", func(cfg models.Config) (models.Model, error) {
		cfg.Context = 64 // keeps its own context; does not describe itself: the Decoder's spec says
		m, err := models.New("gpt-tiny", cfg)
		if err != nil {
			return nil, err
		}
		return undescribed{m.(*models.GPT).Decoder}, nil
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "lm-fixed-layers", "--layers", "3"},
			"train: --layers 3: model lm-fixed-layers was built with layers 2: its factory keeps its own and does not read models.Config's Layers (docs/LIBRARY.md)"},
		{[]string{"--model", "lm-fixed-context", "--context", "32"},
			"train: --context 32: model lm-fixed-context was built with context 64: its factory keeps its own and does not read models.Config's Context (docs/LIBRARY.md)"},
	} {
		if line, ok := usageRefusal(tc.args...); !ok || line != tc.want {
			t.Errorf("train %s: %q; want exit 2 and %q (and the --help pointer)", strings.Join(tc.args, " "), line, tc.want)
		}
	}
	// The sizes each model reads pass: the fixed ones where the flag agrees, the built-ins at other sizes.
	resolved(t, "--model", "lm-fixed-layers", "--layers", "2", "--width", "64")
	resolved(t, "--model", "lm-fixed-context", "--context", "64", "--layers", "3")
	resolved(t, "--model", "gpt-tiny", "--layers", "3", "--heads", "2", "--width", "64", "--context", "32", "--vocab", "300")
	resolved(t, "--model", "llama-tiny", "--layers", "3", "--heads", "4", "--kv-heads", "1", "--width", "64",
		"--ffn-hidden", "96", "--context", "32", "--vocab", "300", "--rope-theta", "500000")
	resolved(t, "--model", "gpt2", "--vocab", "50257", "--layers", "2")
}

// undescribed hides a Decoder's Describe, as a model of one's own on the
// skeleton has none.
type undescribed struct{ *models.Decoder }
