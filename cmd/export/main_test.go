package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/comm"
	_ "github.com/symddp/symddp/comm/shm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/internal/stopsignal"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// trainCheckpoint trains model for a few AdamW steps on one PE (every
// parameter moves off its initial value) and returns its checkpoint
// directory.
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

func runExport(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := run(context.Background(), args, &out, &errb)
	return rc, out.String(), errb.String()
}

func byteText(t *testing.T, context int) datasets.Source {
	t.Helper()
	src, err := datasets.NewTokenSource([][]byte{[]byte(strings.Repeat("func f(x int) int { return x * 2 }\n", 60))}, context, 256)
	require.NoError(t, err)
	return src
}

func TestExportCommand(t *testing.T) {
	ck := trainCheckpoint(t, "gpt", models.Config{Layers: 2, Heads: 2, Width: 16, Context: 8}, byteText(t, 8))
	out := filepath.Join(t.TempDir(), "hf")
	rc, stdout, stderr := runExport("--checkpoint", ck, "--out", out, "--dtype", "bf16")
	require.Equal(t, 0, rc, stderr)
	assert.Regexp(t, `^wrote .*/hf/model.safetensors \(28 tensors, bf16, 0\.0 MiB\) and config.json: model gpt of step 5, 2 layers, 2 heads, width 16, context 8, vocabulary 256\n$`, stdout)
	for _, f := range []string{"model.safetensors", "config.json"} {
		_, err := os.Stat(filepath.Join(out, f))
		require.NoError(t, err, f)
	}

	rc, _, stderr = runExport("--checkpoint", ck, "--out", out)
	assert.Equal(t, 2, rc)
	assert.Equal(t, "export: --out "+out+" already holds model.safetensors: pass --overwrite to replace the export there, or choose another --out\n", stderr)
	rc, _, stderr = runExport("--checkpoint", ck, "--out", out, "--overwrite")
	assert.Equal(t, 0, rc, stderr)
	rc, _, stderr = runExport("--checkpoint", ck, "--out", t.TempDir(), "--vocab", "300")
	assert.Equal(t, 2, rc)
	assert.Equal(t, "export: vocabulary 300: the model has 256 rows in wte\n", stderr)
	rc, _, stderr = runExport("--checkpoint", ck)
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "--out is required")
	// a --checkpoint that is not there, an --out that cannot be made: said
	// before any work, naming the flag, and nothing created
	missing, fresh := filepath.Join(t.TempDir(), "nothing"), filepath.Join(t.TempDir(), "new")
	rc, _, stderr = runExport("--checkpoint", missing, "--out", fresh)
	assert.Equal(t, 2, rc)
	assert.Equal(t, "export: --checkpoint "+missing+": no such file or directory (a checkpoint file, or a --checkpoint-dir of train)\n", stderr)
	assert.NoDirExists(t, fresh)
	blocker := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	rc, _, stderr = runExport("--checkpoint", ck, "--out", filepath.Join(blocker, "hf"))
	assert.Equal(t, 2, rc)
	assert.Equal(t, "export: --out: "+filepath.Join(blocker, "hf")+": cannot create it: not a directory\n", stderr)
	rc, _, stderr = runExport("--checkpoint", ck, "--out", out, "--dtype", "f16")
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, `--dtype "f16": want f32 or bf16`)

	// a classifier's checkpoint: one line saying it has no Hugging Face layout
	train, _, err := datasets.SyntheticSplit(64, 16, 8, 3, 1)
	require.NoError(t, err)
	mlp := trainCheckpoint(t, "mlp", models.Config{Input: []int{8}, Classes: 3, Hidden: []int{4}}, train)
	existing := t.TempDir()
	rc, _, stderr = runExport("--checkpoint", mlp, "--out", existing)
	assert.Equal(t, 2, rc)
	assert.Regexp(t, `^export: .*ckpt-000000005.safetensors holds model "mlp", which has no Hugging Face layout \(it records no sizes\): export writes the checkpoints of the gpt models \(GPT2LMHeadModel\) and of the llama models \(LlamaForCausalLM\)\n$`, stderr)
	assert.DirExists(t, existing, "an --out that was there before stays")

	// a checkpoint that cannot be read or exported: the --out directories
	// export made for it are removed again (they used to stay, empty)
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	require.NoError(t, os.WriteFile(bad, []byte("junk\n"), 0o644))
	root := t.TempDir()
	for _, ck := range []string{bad, mlp} {
		rc, _, stderr = runExport("--checkpoint", ck, "--out", filepath.Join(root, "new", "hf"))
		assert.Equal(t, 2, rc, stderr)
		assert.NoDirExists(t, filepath.Join(root, "new"), ck)
	}
}

// A Llama's checkpoint exports as LlamaForCausalLM, and the line says its
// key/value heads.
func TestExportLlamaCommand(t *testing.T) {
	ck := trainCheckpoint(t, "llama", models.Config{Layers: 2, Heads: 4, KVHeads: 2, Width: 16, Context: 8}, byteText(t, 8))
	out := filepath.Join(t.TempDir(), "hf")
	rc, stdout, stderr := runExport("--checkpoint", ck, "--out", out)
	require.Equal(t, 0, rc, stderr)
	assert.Regexp(t, `^wrote .*/hf/model.safetensors \(21 tensors, f32, 0\.1 MiB\) and config.json: model llama of step 5, 2 layers, 4 heads \(2 key/value\), width 16, context 8, vocabulary 256\n$`, stdout)
	cb, err := os.ReadFile(filepath.Join(out, "config.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(cb, &cfg))
	assert.Equal(t, []any{"LlamaForCausalLM"}, cfg["architectures"])

	rc, _, stderr = runExport("--checkpoint", ck, "--out", t.TempDir(), "--vocab", "300")
	assert.Equal(t, 2, rc)
	assert.Equal(t, "export: vocabulary 300: the model has 256 rows in model.embed_tokens.weight\n", stderr)
}

// trainedModel is the language model of checkpoint ck (directory or
// file) and its parameters.
func trainedModel(t *testing.T, ck string) (models.LanguageModel, []float32) {
	t.Helper()
	w, err := ddp.ReadWeights(ck)
	require.NoError(t, err)
	m, err := models.LanguageModelOf(w.Model, w.Config)
	require.NoError(t, err)
	specs := m.Params()
	offsets, n := models.Layout(specs)
	arena := make([]float32, n)
	for i, s := range specs {
		require.NoError(t, w.Read(s.Name, arena[offsets[i]:offsets[i]+s.Size()]))
	}
	return m, arena
}

// ourLogits are the CPU engine's logits of tokens for model m with
// parameters arena, the first vocab columns of each row, and the token
// Generate picks greedily after them.
func ourLogits(t *testing.T, m models.LanguageModel, arena []float32, tokens []int32, vocab int) ([]float32, int32) {
	t.Helper()
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	s, err := models.NewSampler(m, e, arena)
	require.NoError(t, err)
	T, V := m.Data().Input[0], m.Data().Classes
	in := models.Inputs{Tokens: e.AllocLabels(T), Targets: e.AllocLabels(T)}
	toks, none := make([]int32, T), make([]int32, T)
	copy(toks, tokens)
	for i := range none {
		none[i] = -1
	}
	e.SetLabels(in.Tokens, toks)
	e.SetLabels(in.Targets, none)
	s.Forward(in, 1, e.Alloc(3))
	logits, ok := s.(interface{ Logits() compute.Tensor })
	require.True(t, ok, "model %s has no Logits", m.Name())
	all := compute.HostData(logits.Logits())
	out := make([]float32, 0, len(tokens)*vocab)
	for r := range tokens {
		out = append(out, all[r*V:r*V+vocab]...)
	}
	next, err := s.Generate(context.Background(), tokens, 1, models.SampleOptions{Temperature: 0, Vocab: vocab})
	require.NoError(t, err)
	return out, next[0]
}

// checkResult is the check script's report.
type checkResult struct {
	Tokens, Vocab int
	ArgmaxLast    int     `json:"argmax_last"`
	MaxAbsDiff    float64 `json:"max_abs_diff"`
	MaxAbsLogit   float64 `json:"max_abs_logit"`
	Rel           float64
	OK            bool
}

// torchCheck runs bench/<script> (hf_gpt2_check.py, hf_llama_check.py) on
// the exported dir: PyTorch's forward over the file, against our logits.
func torchCheck(t *testing.T, script, dir string, tokens []int32, logits []float32, rtol float64) checkResult {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ours.f32")
	b := make([]byte, 4*len(logits))
	for i, v := range logits {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	require.NoError(t, os.WriteFile(f, b, 0o644))
	ids := make([]string, len(tokens))
	for i, v := range tokens {
		ids[i] = strconv.Itoa(int(v))
	}
	cmd := exec.Command("/usr/bin/python3", filepath.Join("../../bench", script), "--hf", dir, "--tokens", strings.Join(ids, ","),
		"--logits", f, "--rtol", strconv.FormatFloat(rtol, 'g', -1, 64))
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s: %s", script, bytes.TrimSpace(out))
	var r checkResult
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &r), "%s", out)
	require.NoError(t, err, "%s", out)
	return r
}

// PyTorch, reading the exported safetensors itself and running GPT-2's
// forward with Conv1D weights or Llama's (RMSNorm, rotate_half RoPE,
// repeated key/value heads, SwiGLU), computes the logits symddp computes
// for the checkpoint, within 1e-4 of the largest logit in fp32, and picks
// the token Generate picks; in bf16 it matches the weights symddp imports
// from the same file, and the fp32 model within bf16's rounding.
func TestTorchReadsExport(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("no PyTorch for /usr/bin/python3 (Debian's python3-torch): %v", err)
	}
	// GPT-2's tokens, and its vocabulary padded to a multiple of 64 as the
	// gpt2 presets pad it (the export keeps only the tokens' rows)
	tok, err := datasets.NewTokenizer(datasets.GPT2Tokenizer)
	require.NoError(t, err)
	gpt2Tokens := tok.Vocab()
	gpt2Padded := (gpt2Tokens + 63) / 64 * 64
	gpt2Stream := make([]uint16, 4000)
	for i := range gpt2Stream {
		gpt2Stream[i] = uint16((i*7919 + i*i*31) % gpt2Tokens)
	}
	gpt2Data, err := datasets.NewTokenSource([][]uint16{gpt2Stream}, 8, gpt2Padded)
	require.NoError(t, err)
	gpt2, llama := "hf_gpt2_check.py", "hf_llama_check.py"
	llamaCfg := models.Config{Layers: 2, Heads: 4, KVHeads: 2, Width: 32, Context: 16}
	for _, c := range []struct {
		name   string
		model  string
		cfg    models.Config
		data   datasets.Source
		dtype  string
		vocab  int    // of the export
		script string // the PyTorch check
	}{
		{"bytes", "gpt", models.Config{Layers: 2, Heads: 2, Width: 32, Context: 16}, byteText(t, 16), "f32", 256, gpt2},
		{"gpt2-vocab", "gpt", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 8, Vocab: gpt2Padded}, gpt2Data, "f32", gpt2Tokens, gpt2},
		{"bf16", "gpt", models.Config{Layers: 2, Heads: 2, Width: 32, Context: 16}, byteText(t, 16), "bf16", 256, gpt2},
		// untied head, 2 query heads per key/value head
		{"llama", "llama", llamaCfg, byteText(t, 16), "f32", 256, llama},
		// tied head, 4 query heads on one key/value head, Llama 3's θ, GPT-2's padded vocabulary
		{"llama-tied-gpt2-vocab", "llama-124m", models.Config{Layers: 1, Heads: 4, KVHeads: 1, Width: 32, FFNHidden: 64, Context: 8,
			RopeTheta: 500000}, gpt2Data, "f32", gpt2Tokens, llama},
		{"llama-bf16", "llama", llamaCfg, byteText(t, 16), "bf16", 256, llama},
	} {
		t.Run(c.name, func(t *testing.T) {
			ck := trainCheckpoint(t, c.model, c.cfg, c.data)
			hf := filepath.Join(t.TempDir(), "hf")
			rc, _, stderr := runExport("--checkpoint", ck, "--out", hf, "--dtype", c.dtype)
			require.Equal(t, 0, rc, stderr)

			m, trained := trainedModel(t, ck)
			tokens := []int32{3, 17, 200, 42, 9, 255, 1}
			if c.vocab > 256 {
				tokens = []int32{50256, 464, 3290, 318, 257, 50000, 11}
			}
			ours, next := ourLogits(t, m, trained, tokens, c.vocab)
			if c.dtype == "f32" {
				r := torchCheck(t, c.script, hf, tokens, ours, 1e-4)
				assert.True(t, r.OK)
				assert.Equal(t, c.vocab, r.Vocab)
				assert.Equal(t, int(next), r.ArgmaxLast, "PyTorch's most likely next token is Generate's")
				return
			}
			// bf16: the values symddp imports from the file give PyTorch's logits
			imported, err := ddp.ReadInitWeights(hf, m)
			require.NoError(t, err)
			fromFile, _ := ourLogits(t, m, imported, tokens, c.vocab)
			r := torchCheck(t, c.script, hf, tokens, fromFile, 1e-4)
			assert.True(t, r.OK)
			// and the fp32 model's to within bf16's rounding of every weight
			// (8 bits of mantissa, compounded over the layers: 4.2e-2 here)
			r = torchCheck(t, c.script, hf, tokens, ours, 1e-1)
			assert.True(t, r.OK)
			assert.Greater(t, r.Rel, 1e-6, "bf16 rounding shows in the logits")
		})
	}
}

// SIGINT or SIGTERM during an export (a cancelled context with the signal
// as its cause) exits 128 + the signal and leaves --out as it was: a
// directory export made is removed again, an earlier export is unchanged,
// and no temporary file stays.
func TestExportStoppedBySignal(t *testing.T) {
	ck := trainCheckpoint(t, "gpt", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 8}, byteText(t, 8))
	stopped, cancel := context.WithCancelCause(context.Background())
	cancel(stopsignal.Stop{Signal: syscall.SIGTERM})
	runStopped := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		rc := run(stopped, args, &out, &errb)
		assert.Empty(t, out.String())
		return rc, errb.String()
	}

	out := filepath.Join(t.TempDir(), "new", "hf")
	rc, stderr := runStopped("--checkpoint", ck, "--out", out)
	assert.Equal(t, 143, rc)
	assert.Equal(t, "export: stopped by SIGTERM: --out "+out+" is as it was (nothing of this export written)\n", stderr)
	_, err := os.Stat(filepath.Dir(out))
	assert.ErrorIs(t, err, os.ErrNotExist, "the directories export made are removed")

	out = filepath.Join(t.TempDir(), "hf")
	rc, _, stderr = runExport("--checkpoint", ck, "--out", out, "--dtype", "bf16")
	require.Equal(t, 0, rc, stderr)
	before, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
	require.NoError(t, err)
	rc, _ = runStopped("--checkpoint", ck, "--out", out, "--overwrite")
	assert.Equal(t, 143, rc)
	after, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
	require.NoError(t, err)
	assert.Equal(t, before, after, "the earlier export is unchanged")
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "model.safetensors and config.json, no temporary file")
}

// A checkpoint directory whose newest checkpoint is damaged exports the
// newest intact one, and says so on stderr (it used to say nothing).
func TestExportSaysItReadAnOlderCheckpoint(t *testing.T) {
	ck := trainCheckpoint(t, "gpt", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 8}, byteText(t, 8))
	good := filepath.Join(ck, "ckpt-000000005.safetensors")
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	damaged := filepath.Join(ck, "ckpt-000000009.safetensors")
	require.NoError(t, os.WriteFile(damaged, b[:len(b)/3], 0o644))

	rc, stdout, stderr := runExport("--checkpoint", ck, "--out", filepath.Join(t.TempDir(), "hf"))
	require.Equal(t, 0, rc, stderr)
	assert.Contains(t, stdout, "of step 5")
	assert.Regexp(t, `^export: warning: `+damaged+`: checkpoint file is corrupt: the header's tensors need .*; read the newest intact checkpoint instead, `+good+` \(step 5\)\n$`, stderr)
}

// An --out directory that exists but takes no file (read-only) is one line
// and exit 2 before the checkpoint is read, as tokenize's and train's
// output directories are; it was exit 1 with the name of a temporary file
// (`open DIR/.model.safetensors-1234.tmp: read-only file system`).
func TestExportOutUnwritable(t *testing.T) {
	ro := t.TempDir()
	if os.Geteuid() == 0 { // root writes into a mode-0500 directory anyway
		if err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro).Run(); err != nil {
			t.Skipf("cannot mount a read-only tmpfs here: %v", err)
		}
		defer exec.Command("umount", ro).Run()
	} else {
		require.NoError(t, os.Chmod(ro, 0o500))
		defer os.Chmod(ro, 0o700)
	}
	ck := trainCheckpoint(t, "gpt", models.Config{Layers: 1, Heads: 2, Width: 16, Context: 8}, byteText(t, 8))
	rc, stdout, stderr := runExport("--checkpoint", ck, "--out", ro)
	assert.Equal(t, 2, rc)
	assert.Empty(t, stdout)
	assert.Regexp(t, `^export: --out: `+ro+`: cannot write in it: (read-only file system|permission denied)\n$`, stderr)
}
