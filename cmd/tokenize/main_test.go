package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/internal/stopsignal"
)

func runTokenize(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := run(context.Background(), args, &out, &errb)
	return rc, out.String(), errb.String()
}

// textDir writes the files of a small corpus and returns the directory and
// the texts in file order (sorted names, depth first).
func textDir(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	files := []struct{ name, text string }{
		{"a.txt", "Hello world\n"},
		{"b/c.go", "package c\n\nfunc C() int { return 42 }\n"},
		{"b/d.md", "# The dog was found in a field\n"},
		{"b/e.txt", "bytes outside UTF-8: \xff\xfe, a DEL: \x7f, spelled: <|endoftext|>\n"},
		{"f.txt", strings.Repeat("the quick brown fox jumps over the lazy dog. ", 20)},
		{"g.txt", "élan, 中文, emoji 🎉\n"},
	}
	var texts []string
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(f.text), 0o644))
		texts = append(texts, f.text)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin.dat"), []byte{1, 0, 2}, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".hidden"), []byte("hidden\n"), 0o644))
	return dir, texts
}

// readShard returns the tokens of one shard, read by datasets.LoadShards
// with GPT-2's padded vocabulary of 50304.
func readShard(t *testing.T, path string) []int32 {
	t.Helper()
	src, _, err := datasets.LoadShards(path, "", 1, 50304)
	require.NoError(t, err, path)
	defer src.Close()
	require.Equal(t, 1, src.Streams())
	var out []int32
	x, y := make([]int32, 1), make([]int32, 1)
	for i := range src.Len() {
		src.GatherBatch([]int{i}, datasets.Batch{Tokens: x, Y: y})
		out = append(out, x[0])
	}
	return append(out, y[0])
}

// splitDocs decodes tokens that start with <|endoftext|> into the texts
// between the EOTs.
func splitDocs(t *testing.T, tokens []int32) []string {
	t.Helper()
	tok, err := datasets.NewTokenizer("gpt2")
	require.NoError(t, err)
	require.NotEmpty(t, tokens)
	require.Equal(t, int32(50256), tokens[0], "a document starts with <|endoftext|>")
	var docs []string
	start := 1
	for i := 1; i <= len(tokens); i++ {
		if i == len(tokens) || tokens[i] == 50256 {
			text, err := tok.Decode(tokens[start:i])
			require.NoError(t, err)
			docs = append(docs, text)
			start = i + 1
		}
	}
	return docs
}

func TestTokenizeWritesShardsThatDecodeToTheFiles(t *testing.T) {
	dir, texts := textDir(t)
	out := filepath.Join(t.TempDir(), "shards")
	rc, stdout, stderr := runTokenize("--out", out, "--val-every", "3", "--shard-tokens", "60", "--verify", dir)
	require.Equal(t, 0, rc, stderr)
	name := filepath.Base(dir)
	assert.Contains(t, stdout, "read 6 text files (1 binary skipped)")
	assert.Regexp(t, `\nvalidation: one text file in 3 \(files 2, 5, \.\.\. counting from 0, in file order\); 2 text files, \d+ bytes, \d+ tokens\n`, stdout)
	assert.Regexp(t, `\ntraining: 4 text files, \d+ bytes, \d+ tokens\n`, stdout)
	assert.Contains(t, stdout, "every document decoded back to its file")

	// Files 2 and 5 (0-based) are validation data, shard 0; the training
	// shards follow, cut at 60 tokens, documents running across them.
	vals, _ := filepath.Glob(filepath.Join(out, name+"_val_*.bin"))
	trains, _ := filepath.Glob(filepath.Join(out, name+"_train_*.bin"))
	require.Equal(t, []string{filepath.Join(out, name+"_val_000000.bin")}, vals)
	require.GreaterOrEqual(t, len(trains), 3, "about 200 training tokens in shards of 60")
	assert.Equal(t, filepath.Join(out, name+"_train_000001.bin"), trains[0])
	var train []int32
	for i, p := range trains {
		toks := readShard(t, p)
		if i < len(trains)-1 {
			assert.Len(t, toks, 60, p)
		}
		train = append(train, toks...)
	}
	assert.Equal(t, []string{texts[0], texts[1], texts[3], texts[4]}, splitDocs(t, train))
	assert.Equal(t, []string{texts[2], texts[5]}, splitDocs(t, readShard(t, vals[0])))
	for _, line := range []string{"wrote " + vals[0], "wrote " + trains[0]} {
		assert.Contains(t, stdout, line)
	}
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Len(t, entries, len(vals)+len(trains), "no temporary files left")
}

func TestTokenizeIsIndependentOfWorkers(t *testing.T) {
	dir, _ := textDir(t)
	read := func(workers string) map[string][]byte {
		out := t.TempDir()
		rc, _, stderr := runTokenize("--out", out, "--name", "w", "--workers", workers, "--shard-tokens", "50", dir)
		require.Equal(t, 0, rc, stderr)
		files := map[string][]byte{}
		entries, err := os.ReadDir(out)
		require.NoError(t, err)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(out, e.Name()))
			require.NoError(t, err)
			files[e.Name()] = b
		}
		return files
	}
	one, three := read("1"), read("3")
	require.NotEmpty(t, one)
	assert.Equal(t, one, three, "the shards of 1 and 3 workers are the same bytes")
}

func TestTokenizeByteTokenizer(t *testing.T) {
	dir, texts := textDir(t)
	out := t.TempDir()
	rc, stdout, stderr := runTokenize("--out", out, "--name", "bytes", "--tokenizer", "byte", "--val-every", "100", filepath.Join(dir, "f.txt"))
	require.Equal(t, 0, rc, stderr)
	// One file, fewer than 100: the last 1/100 of its bytes is validation
	// data; byte tokens have no EOT.
	text := texts[4]
	cut := len(text) - len(text)/100
	// The report says so (it used to say "training: 0 files").
	assert.Contains(t, stdout, "read 1 text file (0 binary skipped), ")
	assert.Contains(t, stdout, fmt.Sprintf("\nvalidation: the last 1/100 of the bytes (fewer than 100 text files): %d bytes, %d tokens\n", len(text)-cut, len(text)-cut))
	assert.Contains(t, stdout, fmt.Sprintf("\ntraining: the first %d bytes (of 1 text file, split by bytes), %d tokens\n", cut, cut))
	for _, c := range []struct {
		file string
		want string
	}{{"bytes_train_000001.bin", text[:cut]}, {"bytes_val_000000.bin", text[cut:]}} {
		toks := readShard(t, filepath.Join(out, c.file))
		got := make([]byte, len(toks))
		for i, v := range toks {
			got[i] = byte(v)
		}
		assert.Equal(t, c.want, string(got), c.file)
	}
}

func TestTokenizeErrors(t *testing.T) {
	dir, _ := textDir(t)
	out := t.TempDir()
	notDir := filepath.Join(out, "file")
	require.NoError(t, os.WriteFile(notDir, []byte("x"), 0o644))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no out", []string{dir}, "tokenize: --out is required: the directory to write the shards into"},
		{"no path", []string{"--out", out}, "tokenize: name at least one text file or directory, e.g. $(go env GOROOT)/src"},
		{"missing path", []string{"--out", out, filepath.Join(dir, "nope")}, "tokenize: PATH " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"tokenizer", []string{"--out", out, "--tokenizer", "gpt4", dir}, `tokenize: --tokenizer "gpt4": want gpt2 or byte`},
		{"val every", []string{"--out", out, "--val-every", "1", dir}, "tokenize: --val-every 1: want 2 or more"},
		{"shard tokens", []string{"--out", out, "--shard-tokens", "0", dir}, "tokenize: --shard-tokens 0: want 1 to 2147483647 (the header counts in an int32)"},
		{"name", []string{"--out", out, "--name", "a/b", dir}, `tokenize: --name "a/b": want a plain file name, not starting with '.'`},
		{"out is a file", []string{"--out", notDir, dir}, "tokenize: --out " + notDir + ": not a directory"},
		{"flag", []string{"--outt", out, dir}, "tokenize: unknown flag: --outt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc, _, stderr := runTokenize(c.args...)
			assert.Equal(t, 2, rc)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			assert.Equal(t, []string{c.want, "Run 'tokenize --help' for the flags."}, lines)
		})
	}
	// Shards of the name already there: refused before any work, unless
	// --force.
	rc, _, stderr := runTokenize("--out", out, "--name", "x", dir)
	require.Equal(t, 0, rc, stderr)
	before, _ := filepath.Glob(filepath.Join(out, "x_*.bin"))
	rc, _, stderr = runTokenize("--out", out, "--name", "x", dir)
	assert.Equal(t, 2, rc)
	assert.Contains(t, stderr, "already holds 2 shards named x_train_*/x_val_* (x_train_000001.bin, ...): delete them, pass --force, or choose another --name")
	rc, _, stderr = runTokenize("--out", out, "--name", "x", "--force", filepath.Join(dir, "a.txt"), filepath.Join(dir, "f.txt"))
	require.Equal(t, 0, rc, stderr)
	after, _ := filepath.Glob(filepath.Join(out, "x_*.bin"))
	assert.Equal(t, before, after)
	assert.Equal(t, []string{"Hello world\n"}, splitDocs(t, readShard(t, filepath.Join(out, "x_train_000001.bin")))[:1])

	rc, stdout, _ := runTokenize("--help")
	assert.Equal(t, 0, rc)
	assert.True(t, strings.HasPrefix(stdout, "tokenize: encode text files into llm.c token shards"), stdout)
	assert.True(t, slices.ContainsFunc(strings.Split(stdout, "\n"), func(l string) bool { return strings.Contains(l, "--shard-tokens") }))
}

// TestTokenizeFailureLeavesNoDirectory: a run that fails before writing a
// shard (an input directory without text) removes the --out directories it
// made, and keeps one that existed before.
func TestTokenizeFailureLeavesNoDirectory(t *testing.T) {
	empty, root := t.TempDir(), t.TempDir()
	out := filepath.Join(root, "new", "shards")
	rc, _, stderr := runTokenize("--out", out, empty)
	assert.Equal(t, 2, rc, "an input without text, as train --data-dir says of it")
	assert.Equal(t, "tokenize: text corpus: no text files in "+empty+"\n", stderr)
	assert.NoDirExists(t, filepath.Join(root, "new"), "made by the failed run")

	rc, _, _ = runTokenize("--out", root, empty)
	assert.Equal(t, 2, rc)
	assert.DirExists(t, root, "there before the run")
}

// SIGINT or SIGTERM (a context cancelled with the signal as its cause)
// exits 128 + the signal and leaves --out as it was: a directory tokenize
// made is removed, and the shards that --force would replace are still
// there, unchanged, until the new ones are complete.
func TestTokenizeStoppedBySignal(t *testing.T) {
	dir, _ := textDir(t)
	stopped, cancel := context.WithCancelCause(context.Background())
	cancel(stopsignal.Stop{Signal: syscall.SIGINT})
	runStopped := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		rc := run(stopped, args, &out, &errb)
		assert.Empty(t, out.String())
		return rc, errb.String()
	}
	root := t.TempDir()
	out := filepath.Join(root, "new", "shards")
	rc, stderr := runStopped("--out", out, dir)
	assert.Equal(t, 130, rc)
	assert.Equal(t, "tokenize: stopped by SIGINT: no shard written; --out "+out+" holds what it held before\n", stderr)
	assert.NoDirExists(t, filepath.Join(root, "new"), "made by the stopped run")

	out = t.TempDir()
	rc, _, stderr = runTokenize("--out", out, "--name", "x", "--shard-tokens", "20", dir)
	require.Equal(t, 0, rc, stderr)
	shards := func() map[string]string { // name: SHA-256 of the file
		paths, _ := filepath.Glob(filepath.Join(out, "*"))
		hidden, _ := filepath.Glob(filepath.Join(out, ".*"))
		got := map[string]string{}
		for _, p := range append(paths, hidden...) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			got[filepath.Base(p)] = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		return got
	}
	before := shards()
	require.Greater(t, len(before), 2)
	rc, _ = runStopped("--out", out, "--name", "x", "--force", filepath.Join(dir, "a.txt"))
	assert.Equal(t, 130, rc)
	assert.Equal(t, before, shards(), "--force deletes the old shards only once the new ones are complete")

	// Completed, --force replaces them: the shards of the new run only.
	rc, _, stderr = runTokenize("--out", out, "--name", "x", "--force", filepath.Join(dir, "a.txt"), filepath.Join(dir, "f.txt"))
	require.Equal(t, 0, rc, stderr)
	after := shards()
	assert.Len(t, after, 2)
	assert.Equal(t, []string{"Hello world\n"}, splitDocs(t, readShard(t, filepath.Join(out, "x_train_000001.bin")))[:1])
}
