package traincmd

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInitFrom: a run started from another run's checkpoint with
// --init-from trains from step 1 with fresh optimizer state on other data
// (fine-tuning), where --resume would continue the old run; the flags that
// cannot go together are one line before any PE starts.
func TestInitFrom(t *testing.T) {
	dir := t.TempDir()
	gpt := []string{"--pes", "2", "--model", "gpt", "--layers", "1", "--width", "16", "--heads", "2", "--context", "16",
		"--dataset", "synthetic", "--eval-batches", "1", "--sample-tokens", "0", "--no-progress"}
	code, _, stderr := runTrain(t, nil, append(gpt, "--max-steps", "6", "--checkpoint-dir", dir)...)
	require.Equal(t, 0, code, stderr)
	code, stdout, stderr := runTrain(t, nil, append(gpt, "--max-steps", "4", "--init-from", dir, "--seed", "7", "--lr", "1e-4")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "done: 4 steps in ", "a fresh run of 4 steps, not a resumed one")
	assert.NotContains(t, stderr, "resumed from")
	assert.Regexp(t, regexp.MustCompile(`replicas identical on both PEs \(step 4, parameter hash [0-9a-f]{16}\)`), stdout)

	for _, tc := range []struct {
		args  []string
		want  string
		lines int
	}{
		{[]string{"--init-from", dir, "--resume", "latest", "--checkpoint-dir", dir}, "--init-from and --resume: --resume continues a run with its own weights; give one of them", 2},
		{[]string{"--init-from", filepath.Join(dir, "none")}, "--init-from " + filepath.Join(dir, "none") + ": no such file or directory", 1},
		{[]string{"--vocab", "300"}, "--layers, --heads, --width, --context, --vocab, --kv-heads, --ffn-hidden and --rope-theta size a language model, not mlp", 2},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != 2 || !strings.Contains(lines[0], tc.want) || len(lines) != tc.lines {
			t.Errorf("train %s: exit %d, stderr %q; want exit 2 and %q in %d lines", strings.Join(tc.args, " "), code, stderr.String(), tc.want, tc.lines)
		}
	}
	// a checkpoint of another shape: one line saying PE 0 read it, exit 2
	code, _, stderr = runTrain(t, nil, append(gpt[:len(gpt):len(gpt)], "--max-steps", "2", "--init-from", dir, "--width", "32")...)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "train: initial weights (read on PE 0): "+filepath.Join(dir, "ckpt-000000006.safetensors")+": the checkpoint's model has width 16, this model 32")
	assert.NotContains(t, stderr, "Run 'train --help'")
}
