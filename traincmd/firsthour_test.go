package traincmd

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runTrain runs the train binary with args and returns its exit status,
// stdout and stderr.
func runTrain(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(trainBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return exitCode(t, cmd.Run()), stdout.String(), stderr.String()
}

// TestDamagedCheckpointIsOneLine: every PE fails alike when the checkpoint to
// resume from is damaged (and none older is intact), in one line that says
// why, not which PE exited first, without the pointer to --help; exit 2,
// and --max-restarts does not retry it (each restart failed the same way,
// exit 1, before 2026-12-07).
func TestDamagedCheckpointIsOneLine(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--pes", "3", "--dataset", "synthetic", "--hidden", "16", "--batch-size", "48", "--max-steps", "4",
		"--checkpoint-dir", dir, "--no-progress", "--eval-every", "0"}
	code, _, stderr := runTrain(t, nil, args...)
	require.Equal(t, 0, code, stderr)
	ckpts, _ := filepath.Glob(filepath.Join(dir, "ckpt-*.safetensors"))
	require.Len(t, ckpts, 1)
	f, err := os.OpenFile(ckpts[0], os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("damage"), 4096)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	for range 3 { // which PE exits first varies from run to run
		code, _, stderr = runTrain(t, nil, append(args, "--max-steps", "8", "--resume", "latest", "--max-restarts", "2")...)
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "\ntrain: load checkpoint "+ckpts[0]+": checkpoint file is corrupt: SHA-256")
		assert.Equal(t, 1, strings.Count(stderr, "is corrupt"), stderr)
		assert.NotContains(t, stderr, "restart")
		assert.NotContains(t, stderr, "PE 0 failed")
		assert.NotContains(t, stderr, "PE 1 failed")
		assert.NotContains(t, stderr, "PE 2 failed")
		assert.NotContains(t, stderr, "Run 'train --help'")
	}
}

// TestFileErrorsHaveNoHelpLine: a problem with the run's files is one line
// and exit 2 before any PE starts, without the pointer to --help, which
// belongs to mistakes in the flags.
func TestFileErrorsHaveNoHelpLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-dir", dir}, "train-images-idx3-ubyte"},
		{[]string{"--model", "gpt-tiny", "--data-dir", filepath.Join(dir, "none")}, "--data-dir " + filepath.Join(dir, "none") + ": stat"},
		{[]string{"--resume", filepath.Join(dir, "ckpt.safetensors")}, "--resume " + filepath.Join(dir, "ckpt.safetensors") + ": no such file or directory"},
		{[]string{"--metrics", filepath.Join(dir, "no", "m.jsonl")}, "--metrics " + filepath.Join(dir, "no", "m.jsonl") + ": no such file or directory"},
		{[]string{"--model", "gpt-tiny", "--dataset", "llmc", "--train-shards", filepath.Join(dir, "*.bin"), "--val-shards", filepath.Join(dir, "*.bin")}, "matches no file"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != 2 || !strings.Contains(lines[0], tc.want) || len(lines) != 1 {
			t.Errorf("train %s: exit %d, stderr %q; want exit 2 and one line containing %q (no --help pointer)",
				strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
	}
}

// TestResumedSummary: the summary of a resumed run counts the steps it
// trained, not the step it reached; a run shorter than an epoch says how
// much of one it did.
func TestResumedSummary(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--pes", "2", "--dataset", "synthetic", "--hidden", "16", "--batch-size", "64",
		"--checkpoint-dir", dir, "--no-progress", "--eval-every", "0"}
	code, stdout, stderr := runTrain(t, nil, append(args, "--max-steps", "10")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "done: 10 steps (0.011 epochs) in ") // 938 steps an epoch
	code, stdout, stderr = runTrain(t, nil, append(args, "--max-steps", "16", "--resume", "latest")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "done: 6 steps (11-16, resumed at 10) (0.017 epochs) in ")
	// resumed where the run already ends: said at the start and in the summary
	code, stdout, stderr = runTrain(t, nil, append(args, "--max-steps", "16", "--resume", "latest")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "note: this run ends at step 16, so there is nothing to train: raise --max-steps (or --epochs) to go on\n")
	assert.Contains(t, stdout, "done: 0 steps (resumed at 16, the run's end) (0.017 epochs) in ")
}

// TestResumeOnOtherDataWarns: a checkpoint records the data its run trained
// on, and a run that resumes it on other data (another --dataset,
// --corpus-max, --data-dir, ...) says so, as for any other change of recipe.
// Before 2026-12-08 it went on in silence whenever the step fell in the
// first epoch of both datasets, which the position check cannot tell apart.
func TestResumeOnOtherDataWarns(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--model", "gpt", "--layers", "1", "--width", "32", "--heads", "2", "--context", "32",
		"--sample-tokens", "0", "--eval-every", "0", "--eval-batches", "1", "--no-progress", "--checkpoint-dir", dir}
	code, _, stderr := runTrain(t, nil, append(args, "--corpus-max", "64KiB", "--max-steps", "2")...)
	require.Equal(t, 0, code, stderr)
	// the same data: no warning
	code, _, stderr = runTrain(t, nil, append(args, "--corpus-max", "64KiB", "--max-steps", "3", "--resume", "latest")...)
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "data ")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--corpus-max", "128KiB"}, " byte tokens first 65536 bytes → text "},
		{[]string{"--dataset", "synthetic"}, " byte tokens first 65536 bytes → synthetic, "},
	} {
		code, _, stderr = runTrain(t, nil, append(append(args, tc.args...), "--max-steps", "4", "--resume", "latest")...)
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stderr, "was written with another recipe: data text /", "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
		require.NoError(t, os.Remove(filepath.Join(dir, "ckpt-000000004.safetensors")))
	}
}

// TestRunLengthDefaults: --epochs 0 with --max-steps trains the steps it
// planned (it stopped after one epoch, its schedule aimed at the later
// step), and a language model's default warm-up is a tenth of the steps the
// run takes, also when its corpus or --epochs make it shorter than
// --max-steps (19 steps warmed up for 20 and failed to start).
func TestRunLengthDefaults(t *testing.T) {
	args := []string{"--model", "gpt-tiny", "--sample-tokens", "0", "--eval-every", "0", "--no-progress"}
	code, stdout, stderr := runTrain(t, nil, append(args, "--corpus-max", "64KiB", "--epochs", "0", "--max-steps", "40")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "done: 40 steps in ") // 31 steps an epoch
	assert.Contains(t, stderr, "lr 0.001 after 4 steps of linear warm-up, cosine to 0 at step 40,")
	code, stdout, stderr = runTrain(t, nil, append(args, "--corpus-max", "40KiB", "--epochs", "1")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "done: 19 steps in ")
	assert.Contains(t, stderr, "lr 0.001 after 1 step of linear warm-up, cosine to 0 at step 19,")
}

func TestStepsAndEpochsWording(t *testing.T) {
	assert.Equal(t, "400 steps", stepsDone(400, 0))
	assert.Equal(t, "1 step", stepsDone(1, 0))
	assert.Equal(t, "300 steps (101-400, resumed at 100)", stepsDone(400, 100))
	assert.Equal(t, "1 step (401-401, resumed at 400)", stepsDone(401, 400))
	assert.Equal(t, "0 steps (resumed at 400, the run's end)", stepsDone(400, 400))
	assert.Equal(t, "5 epochs", epochs(1175, 235))
	assert.Equal(t, "1 epoch", epochs(235, 235))
	assert.Equal(t, "0.085 epochs", epochs(20, 235))
	assert.Equal(t, "2.5 epochs", epochs(50, 20))
	assert.Equal(t, "0 epochs", epochs(0, 0))
}

// TestByteModelOnShardsSamplesText: a byte-level model trained on llm.c
// shards prints its end-of-run sample as text, as generate does for the
// same checkpoint, not as token ids.
func TestByteModelOnShardsSamplesText(t *testing.T) {
	dir := t.TempDir()
	text := strings.Repeat("the quick brown fox jumps over the lazy dog\n", 200)
	for _, name := range []string{"train.bin", "val.bin"} {
		hdr := make([]int32, 256)
		hdr[0], hdr[1], hdr[2] = 20240520, 1, int32(len(text))
		var b bytes.Buffer
		require.NoError(t, binary.Write(&b, binary.LittleEndian, hdr))
		for i := range len(text) {
			require.NoError(t, binary.Write(&b, binary.LittleEndian, uint16(text[i])))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644))
	}
	code, stdout, stderr := runTrain(t, nil, "--pes", "2", "--model", "gpt", "--layers", "1", "--width", "16", "--heads", "2",
		"--context", "16", "--dataset", "llmc", "--train-shards", filepath.Join(dir, "train.bin"), "--val-shards",
		filepath.Join(dir, "val.bin"), "--max-steps", "4", "--eval-batches", "1", "--sample-tokens", "10", "--no-progress")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "sample (temperature 0.8, top-k 40) after \"")
	assert.NotContains(t, stdout, "token ids")
}

// TestMismatchedCheckpointIsNotRestarted: a checkpoint of another model is
// a command-line problem: one line that says what to pass, exit 2, and no
// restart, which would fail the same way (with --max-restarts 2 it was
// tried three times and exited 1).
func TestMismatchedCheckpointIsNotRestarted(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--pes", "2", "--dataset", "synthetic", "--batch-size", "32", "--max-steps", "2",
		"--checkpoint-dir", dir, "--no-progress", "--eval-every", "0"}
	code, _, stderr := runTrain(t, nil, append(args, "--hidden", "16")...)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runTrain(t, nil, append(args, "--hidden", "8", "--resume", "latest", "--max-restarts", "2", "--max-steps", "4")...)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "checkpoint does not match this run: ")
	// an mlp records no sizes: the widths its tensors have are named as the flag
	assert.Contains(t, stderr, "in the model: the checkpoint's mlp has --hidden 16")
	assert.NotContains(t, stderr, "restart")
	assert.NotContains(t, stderr, "Run 'train --help'")
	assert.Equal(t, 1, strings.Count(stderr, "does not match"), stderr)
	// and so for --init-from
	code, _, stderr = runTrain(t, nil, "--pes", "2", "--dataset", "synthetic", "--batch-size", "32", "--max-steps", "1",
		"--checkpoint-dir", t.TempDir(), "--no-progress", "--eval-every", "0", "--hidden", "8", "--init-from", dir)
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "the model's is [8 784]: the checkpoint's mlp has --hidden 16")
}
