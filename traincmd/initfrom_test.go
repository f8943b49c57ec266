package traincmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/ddp"
)

// TestInitFrom: a run started from another run's checkpoint with
// --init-from trains from step 1 with fresh optimizer state on other data
// (fine-tuning), where --resume would continue the old run; the flags that
// cannot go together are one line before any PE starts.
func TestInitFrom(t *testing.T) {
	dir := t.TempDir()
	gpt := []string{"--pes", "2", "--model", "gpt", "--layers", "1", "--width", "16", "--heads", "2", "--context", "16",
		"--dataset", "synthetic", "--eval-batches", "1", "--sample-tokens", "0", "--no-progress"}
	code, trained, stderr := runTrain(t, nil, append(gpt, "--max-steps", "6", "--checkpoint-dir", dir)...)
	require.Equal(t, 0, code, stderr)
	code, stdout, stderr := runTrain(t, nil, append(gpt, "--max-steps", "4", "--init-from", dir, "--seed", "7", "--lr", "1e-4")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "done: 4 steps in ", "a fresh run of 4 steps, not a resumed one")
	assert.NotContains(t, stderr, "resumed from")
	assert.Contains(t, stderr, "initial weights: "+filepath.Join(dir, "ckpt-000000006.safetensors")+" (step 6 of gpt); fresh optimizer state, step 0\n")

	assert.Regexp(t, regexp.MustCompile(`replicas identical on both PEs \(step 4, parameter hash [0-9a-f]{16}\)`), stdout)

	// --eval-only: the validation loss the training run ended on, from its
	// checkpoint, and nothing trained
	code, stdout, stderr = runTrain(t, nil, append(gpt, "--init-from", dir, "--eval-only", "--metrics", filepath.Join(dir, "m.jsonl"))...)
	require.Equal(t, 0, code, stderr)
	final := regexp.MustCompile(`val loss [0-9.]+ \([0-9]+ tokens\)`)
	require.NotEmpty(t, final.FindString(trained), trained)
	assert.Equal(t, final.FindString(trained), final.FindString(stdout), stdout)
	assert.Contains(t, stderr, "evaluating gpt: ", stderr)
	assert.Contains(t, stderr, " parameters from "+filepath.Join(dir, "ckpt-000000006.safetensors")+" (step 6 of gpt), on 2 PEs (shm, ")
	assert.Contains(t, stderr, "): 16 sequences of 16 tokens of the validation set\n")
	assert.NotContains(t, stdout+stderr, "step 1")
	metrics, err := os.ReadFile(filepath.Join(dir, "m.jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(metrics), `"eval_only":true`)
	assert.NotContains(t, string(metrics), `"loss"`, "no training record")
	ck, err := filepath.Glob(filepath.Join(dir, "ckpt-*"))
	require.NoError(t, err)
	assert.Len(t, ck, 1, "no checkpoint written")

	for _, tc := range []struct {
		args  []string
		want  string
		lines int
	}{
		{[]string{"--init-from", dir, "--resume", "latest", "--checkpoint-dir", dir}, "--init-from and --resume: --resume continues a run with its own weights; give one of them", 2},
		{[]string{"--init-from", filepath.Join(dir, "none")}, "--init-from " + filepath.Join(dir, "none") + ": no such file or directory", 1},
		{[]string{"--eval-only"}, "--eval-only evaluates the weights of --init-from: give it a checkpoint file, a --checkpoint-dir or a Hugging Face directory", 2},
		{[]string{"--eval-only", "--init-from", dir, "--checkpoint-dir", t.TempDir()}, "--eval-only trains nothing and writes no checkpoint: drop --checkpoint-dir and --max-restarts", 2},
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

// TestInitFromHFLlama: a llama run starts from another run's checkpoint
// exported as LlamaForCausalLM; a directory whose tensor does not fit the
// model its config.json describes is one line naming the tensor, exit 2.
func TestInitFromHFLlama(t *testing.T) {
	dir, hf := t.TempDir(), filepath.Join(t.TempDir(), "hf")
	llama := []string{"--pes", "2", "--model", "llama", "--layers", "1", "--width", "16", "--heads", "4", "--kv-heads", "2",
		"--context", "16", "--dataset", "synthetic", "--eval-batches", "1", "--sample-tokens", "0", "--no-progress"}
	code, _, stderr := runTrain(t, nil, append(llama, "--max-steps", "4", "--checkpoint-dir", dir)...)
	require.Equal(t, 0, code, stderr)
	w, err := ddp.ReadWeights(dir)
	require.NoError(t, err)
	_, err = ddp.ExportHF(w, hf, ddp.HFExportOptions{})
	require.NoError(t, err)

	code, stdout, stderr := runTrain(t, nil, append(llama, "--max-steps", "2", "--init-from", hf, "--seed", "7")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "done: 2 steps in ")
	assert.Regexp(t, regexp.MustCompile(`replicas identical on both PEs \(step 2, parameter hash [0-9a-f]{16}\)`), stdout)

	// config.json says 4 key/value heads, the file holds k_proj for 2
	cfgPath := filepath.Join(hf, "config.json")
	b, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(b, &cfg))
	cfg["num_key_value_heads"] = 4
	b, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfgPath, b, 0o644))
	code, _, stderr = runTrain(t, nil, append(llama, "--max-steps", "2", "--init-from", hf, "--kv-heads", "4")...)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "train: initial weights (read on PE 0): "+filepath.Join(hf, "model.safetensors")+
		`: tensor "model.layers.0.self_attn.k_proj.weight" has shape [8 16], want [16 16]`+"\n")
	assert.NotContains(t, stderr, "Run 'train --help'")
}
