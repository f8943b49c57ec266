package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/comm"
	_ "github.com/symddp/symddp/comm/shm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// trainCheckpoint trains model for a few steps on one PE and returns its
// checkpoint directory.
func trainCheckpoint(t *testing.T, model string, cfg models.Config, train datasets.Source) string {
	t.Helper()
	dir := t.TempDir()
	c, err := comm.Open("shm", comm.Config{NPEs: 1})
	require.NoError(t, err)
	defer c.Close()
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	m, err := models.New(model, cfg)
	require.NoError(t, err)
	o, err := optim.New("adamw", optim.Config{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	require.NoError(t, err)
	tr, err := ddp.New(c, e, m, o, ddp.Options{GlobalBatch: 4, MaxSteps: 5, LR: 1e-2, Checkpoint: ddp.CheckpointOptions{Dir: dir}})
	require.NoError(t, err)
	_, err = tr.Fit(context.Background(), train, nil)
	require.NoError(t, err)
	require.NoError(t, tr.Close())
	return dir
}

func runGenerate(args ...string) (int, string, string) {
	return runGenerateCtx(context.Background(), args...)
}

func runGenerateCtx(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := run(ctx, args, &out, &errb)
	return rc, out.String(), errb.String()
}

func TestGenerateFromCheckpoint(t *testing.T) {
	text := []byte(strings.Repeat("hello, world\n", 200))
	train, err := datasets.NewTokenSource([][]byte{text}, 8, 256)
	require.NoError(t, err)
	dir := trainCheckpoint(t, "gpt", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 8}, train)

	rc, out1, stderr := runGenerate("--checkpoint", dir, "--prompt", "hello", "--max-tokens", "12", "--temperature", "0")
	require.Equal(t, 0, rc, stderr)
	assert.True(t, strings.HasPrefix(out1, "hello"), "the prompt comes first: %q", out1)
	assert.Len(t, strings.TrimSuffix(out1, "\n"), len("hello")+12)
	_, out2, _ := runGenerate("--checkpoint", dir, "--prompt", "hello", "--max-tokens", "12", "--temperature", "0")
	assert.Equal(t, out1, out2, "greedy sampling is deterministic")
	_, s1, _ := runGenerate("--checkpoint", dir, "--max-tokens", "30", "--seed", "3")
	_, s2, _ := runGenerate("--checkpoint", dir, "--max-tokens", "30", "--seed", "3")
	assert.Equal(t, s1, s2, "the same seed draws the same sample")

	// A prompt longer than the context (8) is a usage error.
	rc, _, stderr = runGenerate("--checkpoint", dir, "--prompt", "longer than eight")
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "more than the model's context of 8")
	rc, _, stderr = runGenerate("--checkpoint", dir, "--prompt-tokens", "1,300")
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, `"300" is not a token id in [0, 256)`)
	rc, _, stderr = runGenerate("--checkpoint", dir, "--tokenizer", "gpt2")
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "--tokenizer gpt2 has 50257 tokens, more than the model's vocabulary of 256")
	rc, _, stderr = runGenerate("--checkpoint", dir, "--tokenizer", "none")
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "--tokenizer none: give the prompt as --prompt-tokens")
	rc, ids, stderr := runGenerate("--checkpoint", dir, "--tokenizer", "none", "--prompt-tokens", "104,101", "--max-tokens", "3")
	require.Equal(t, 0, rc, stderr)
	assert.Len(t, strings.Split(strings.TrimSpace(ids), ","), 3, "--tokenizer none prints the sample's ids: %q", ids)
}

// A model with GPT-2's vocabulary (the gpt2 preset's 50304, here one small
// layer) takes the prompt as text, encoded after <|endoftext|>, and prints
// text: the decoding of the ids it draws, all of them GPT-2 tokens.
func TestGenerateGPT2Text(t *testing.T) {
	tok, err := datasets.NewTokenizer("gpt2")
	require.NoError(t, err)
	doc := append([]int32{50256}, tok.Encode("The dog was found in a field near the intersection.\n")...)
	var stream []uint16
	for range 60 {
		for _, id := range doc {
			stream = append(stream, uint16(id))
		}
	}
	train, err := datasets.NewTokenSource([][]uint16{stream}, 16, 50304)
	require.NoError(t, err)
	dir := trainCheckpoint(t, "gpt2", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 16}, train)

	rc, text, stderr := runGenerate("--checkpoint", dir, "--prompt", "The dog", "--max-tokens", "8", "--temperature", "0")
	require.Equal(t, 0, rc, stderr)
	assert.True(t, strings.HasPrefix(text, "The dog"), "the prompt comes first: %q", text)
	// "The dog" is [464, 3290] (transformers' GPT-2 generation test).
	rc, idText, stderr := runGenerate("--checkpoint", dir, "--prompt-tokens", "50256,464,3290", "--max-tokens", "8", "--temperature", "0", "--tokenizer", "none")
	require.Equal(t, 0, rc, stderr)
	var ids []int32
	for _, f := range strings.Split(strings.TrimSpace(idText), ",") {
		v, err := strconv.Atoi(f)
		require.NoError(t, err)
		assert.Less(t, v, 50257, "a padding id was drawn")
		ids = append(ids, int32(v))
	}
	require.Len(t, ids, 8)
	sample, err := tok.Decode(ids)
	require.NoError(t, err)
	assert.Equal(t, "The dog"+sample+"\n", text, "the text is the decoding of the drawn ids")
	rc, withEOT, stderr := runGenerate("--checkpoint", dir, "--prompt-tokens", "50256,464,3290", "--max-tokens", "8", "--temperature", "0")
	require.Equal(t, 0, rc, stderr)
	assert.Equal(t, "<|endoftext|>The dog"+sample+"\n", withEOT, "--prompt-tokens are printed decoded")
	rc, unconditional, stderr := runGenerate("--checkpoint", dir, "--max-tokens", "4", "--seed", "2")
	require.Equal(t, 0, rc, stderr)
	assert.NotEmpty(t, strings.TrimSpace(unconditional), "no prompt: a new document")
}

func TestGenerateErrors(t *testing.T) {
	rc, _, stderr := runGenerate()
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "--checkpoint is required")
	for _, temp := range []string{"nan", "-inf", "inf"} { // NaN passed the check that the temperature is not negative
		rc, _, stderr = runGenerate("--checkpoint", t.TempDir(), "--temperature", temp)
		assert.Equal(t, 2, rc, temp)
		assert.True(t, strings.HasPrefix(stderr, "generate: --temperature "), stderr)
		assert.Contains(t, stderr, ": want a finite number\n", temp)
	}
	// an empty --prompt says how to get the default start
	text, err := datasets.NewTokenSource([][]byte{[]byte(strings.Repeat("hello, world\n", 40))}, 16, 256)
	require.NoError(t, err)
	lmDir := trainCheckpoint(t, "gpt", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 16}, text)
	rc, _, stderr = runGenerate("--checkpoint", lmDir, "--prompt", "")
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "--prompt is empty: give it some text, or leave it out to start from a newline")
	// sizes in the metadata that the tensors do not have (edited, or
	// written by another tool; the data's SHA-256 does not cover them):
	// an error, not a model of that size (context 2^40 panicked in makeslice)
	edited := withModelConfig(t, lmDir, "context", 1<<40)
	rc, _, stderr = runGenerate("--checkpoint", edited, "--prompt", "a")
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, edited+`: tensor "wpe" has shape [16 16], the model's is [1099511627776 16], built from the sizes its metadata records`)
	missing := filepath.Join(t.TempDir(), "nothing")
	rc, _, stderr = runGenerate("--checkpoint", missing)
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "generate: --checkpoint "+missing+": no such file or directory (a checkpoint file, or a --checkpoint-dir of train)")
	empty := t.TempDir()
	rc, _, stderr = runGenerate("--checkpoint", empty)
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "no checkpoint in "+empty+": train writes ckpt-<step>.safetensors files there with --checkpoint-dir")
	assert.NotContains(t, stderr, "--help", "a missing checkpoint is not a mistake in the flags")
	require.NoError(t, os.WriteFile(filepath.Join(empty, "ckpt-000000007.safetensors"), []byte("not a checkpoint"), 0o644))
	rc, _, stderr = runGenerate("--checkpoint", empty)
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "no intact checkpoint in "+empty+": "+filepath.Join(empty, "ckpt-000000007.safetensors")+": checkpoint file is corrupt")
	// A classifier's checkpoint records no sizes: generate says what it
	// samples from.
	train, _, err := datasets.SyntheticSplit(64, 16, 8, 3, 1)
	require.NoError(t, err)
	dir := trainCheckpoint(t, "mlp", models.Config{Input: []int{8}, Classes: 3, Hidden: []int{4}}, train)
	rc, _, stderr = runGenerate("--checkpoint", dir)
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, `holds model "mlp", which is not a language model`)
}

// --device gpu samples through the CUDA engine, here an emulated one: the
// model's layers run in bf16, deterministic for a seed; a bad --device is a
// usage error.
func TestGenerateOnDevice(t *testing.T) {
	newGPUEngine = func(string) (compute.Engine, error) { return cudatest.NewEmulated(cuda.Options{}), nil }
	t.Cleanup(func() {
		newGPUEngine = func(lib string) (compute.Engine, error) { return cuda.New(cuda.Options{LibPath: lib}) }
	})
	text := []byte(strings.Repeat("hello, world\n", 800))
	train, err := datasets.NewTokenSource([][]byte{text}, 64, 256)
	require.NoError(t, err)
	dir := trainCheckpoint(t, "gpt", models.Config{Layers: 1, Heads: 2, Width: 64, Context: 64}, train)
	rc, out1, stderr := runGenerate("--checkpoint", dir, "--device", "gpu", "--prompt", "hello", "--max-tokens", "10", "--seed", "4")
	require.Equal(t, 0, rc, stderr)
	assert.True(t, strings.HasPrefix(out1, "hello"), "the prompt comes first: %q", out1)
	assert.Len(t, strings.TrimSuffix(out1, "\n"), len("hello")+10)
	_, out2, _ := runGenerate("--checkpoint", dir, "--device", "gpu", "--prompt", "hello", "--max-tokens", "10", "--seed", "4")
	assert.Equal(t, out1, out2, "the same seed draws the same tokens")
	rc, _, stderr = runGenerate("--checkpoint", dir, "--device", "tpu")
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, `--device "tpu": want cpu or gpu`)
	// an engine that cannot start: the error alone, nothing on stdout (the
	// prompt was written first, so `generate ... > out.txt` kept it)
	newGPUEngine = func(string) (compute.Engine, error) { return nil, errors.New("libsymddp_cuda.so not found") }
	rc, out, stderr := runGenerate("--checkpoint", dir, "--device", "gpu", "--prompt", "hello", "--max-tokens", "10")
	assert.Equal(t, 1, rc)
	assert.Contains(t, stderr, "--device gpu: libsymddp_cuda.so not found")
	assert.Empty(t, out)
}

func TestDrawVocab(t *testing.T) {
	draw := func(vocab int) int {
		t.Helper()
		tok, err := chooseTokenizer("auto", vocab)
		require.NoError(t, err)
		return drawVocab(tok, vocab)
	}
	assert.Equal(t, 50257, draw(50304), "gpt2's padding is never drawn")
	assert.Equal(t, 0, draw(50257), "GPT-2's vocabulary unpadded: all of it")
	assert.Equal(t, 0, draw(1000), "a vocabulary of no tokenizer: all of it")
	assert.Equal(t, 0, draw(256))
	byteTok, err := chooseTokenizer("byte", 50304)
	require.NoError(t, err)
	assert.Equal(t, 256, drawVocab(byteTok, 50304), "bytes only from a byte tokenizer")
}

// A checkpoint directory whose newest checkpoint is damaged samples from
// the newest intact one, and says so on stderr (it used to say nothing).
func TestGenerateSaysItReadAnOlderCheckpoint(t *testing.T) {
	text := []byte(strings.Repeat("hello, world\n", 200))
	train, err := datasets.NewTokenSource([][]byte{text}, 8, 256)
	require.NoError(t, err)
	dir := trainCheckpoint(t, "gpt", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 8}, train)
	good := filepath.Join(dir, "ckpt-000000005.safetensors")
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	damaged := filepath.Join(dir, "ckpt-000000009.safetensors")
	require.NoError(t, os.WriteFile(damaged, b[:len(b)-10], 0o644))

	rc, out, stderr := runGenerate("--checkpoint", dir, "--max-tokens", "4")
	require.Equal(t, 0, rc, stderr)
	assert.NotEmpty(t, out)
	assert.Regexp(t, `^generate: warning: `+damaged+`: checkpoint file is corrupt: .*; read the newest intact checkpoint instead, `+good+` \(step 5\)\n$`, stderr)
}

// withModelConfig copies the newest checkpoint of dir to a file whose
// metadata records key = v in its model_config, and returns the file.
func withModelConfig(t *testing.T, dir, key string, v int) string {
	t.Helper()
	w, err := ddp.ReadWeights(dir)
	require.NoError(t, err)
	b, err := os.ReadFile(w.Path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(b)
	var header map[string]any
	require.NoError(t, json.Unmarshal(b[8:8+n], &header))
	meta := header["__metadata__"].(map[string]any)
	var sym map[string]any
	require.NoError(t, json.Unmarshal([]byte(meta["symddp"].(string)), &sym))
	sym["model_config"].(map[string]any)[key] = v
	js, err := json.Marshal(sym)
	require.NoError(t, err)
	meta["symddp"] = string(js)
	hb, err := json.Marshal(header)
	require.NoError(t, err)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	out = append(append(out, hb...), b[8+n:]...)
	path := filepath.Join(t.TempDir(), "ckpt-000000005.safetensors")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	return path
}
