package traincmd

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/datasets"
)

// writeShard writes an llm.c token shard (version 1, uint16 tokens).
func writeShard(t *testing.T, path string, tokens []uint16) {
	t.Helper()
	head := make([]int32, 256)
	head[0], head[1], head[2] = 20240520, 1, int32(len(tokens))
	var b bytes.Buffer
	require.NoError(t, binary.Write(&b, binary.LittleEndian, head))
	require.NoError(t, binary.Write(&b, binary.LittleEndian, tokens))
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
}

// A language model's mismatched settings are one line and exit 2 before
// any PE starts.
func TestLanguageModelUsageErrors(t *testing.T) {
	dir := t.TempDir()
	good, bad := make([]uint16, 4000), make([]uint16, 4000)
	for i := range good {
		good[i], bad[i] = uint16(i%200), uint16(i%200)
	}
	bad[1234] = 300 // outside a 256-token vocabulary
	writeShard(t, filepath.Join(dir, "good_train_000.bin"), good)
	writeShard(t, filepath.Join(dir, "good_val_000.bin"), good)
	writeShard(t, filepath.Join(dir, "bad_train_000.bin"), bad)
	text := filepath.Join(dir, "text.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("some text\n", 500)), 0o644))
	for _, tc := range []struct {
		args []string
		want string
		file bool // a problem with the data: no pointer to --help
	}{
		{[]string{"--model", "gpt-tiny", "--heads", "3"}, "--heads 3 does not divide --width 128 (gpt-tiny's)", false},
		{[]string{"--model", "gpt-tiny", "--pes", "3"}, "--batch-size 16 is not a multiple of --pes 3", false},
		{[]string{"--model", "gpt-tiny", "--dataset", "mnist"}, "model gpt-tiny is a language model: use --dataset text", false},
		{[]string{"--model", "mlp", "--dataset", "text"}, "--dataset text is token data for a language model", false},
		{[]string{"--model", "gpt-tiny", "--dataset", "llmc"}, "--dataset llmc needs --train-shards and --val-shards", false},
		{[]string{"--model", "gpt-tiny", "--dataset", "llmc", "--train-shards", filepath.Join(dir, "bad_train_*.bin"),
			"--val-shards", filepath.Join(dir, "good_val_*.bin")}, "bad_train_000.bin: bad token shard: token 300 at position 1234 is outside the vocabulary of 256 (model gpt-tiny's): the shards hold ids of a larger vocabulary: pass --vocab 301 or more", true},
		{[]string{"--model", "gpt-tiny", "--dataset", "llmc", "--train-shards", filepath.Join(dir, "none_*.bin"),
			"--val-shards", filepath.Join(dir, "good_val_*.bin")}, "none_*.bin", true},
		{[]string{"--model", "gpt-tiny", "--data-dir", filepath.Join(dir, "missing")}, "missing", true},
		{[]string{"--model", "gpt2", "--dataset", "text", "--vocab-check"}, "unknown flag: --vocab-check", false},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		want := 2 // the line and the pointer to --help
		if tc.file {
			want = 1
		}
		if code != 2 || !strings.Contains(lines[0], tc.want) || len(lines) != want {
			t.Errorf("train %s: exit %d, stderr %q; want exit 2 and one line containing %q (and the --help pointer for flags)",
				strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
	}
	// The shard's error names the token and its place.
	var stdout, stderr bytes.Buffer
	run([]string{"--model", "gpt-tiny", "--dataset", "llmc", "--train-shards", filepath.Join(dir, "bad_train_*.bin"),
		"--val-shards", filepath.Join(dir, "good_val_*.bin")}, &stdout, &stderr)
	assert.Contains(t, stderr.String(), "300")
}

// Shards not much longer than the context lose their ends to the windows:
// train says how much when it is more than 5% of the tokens.
func TestUnreadShardTokens(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 {
		writeShard(t, filepath.Join(dir, fmt.Sprintf("s_train_%d.bin", i)), make([]uint16, 200)) // 1 window of 129, 71 left
	}
	writeShard(t, filepath.Join(dir, "big_train.bin"), make([]uint16, 128*100+1)) // every token read
	for _, tc := range []struct{ glob, want string }{
		{"s_train_*.bin", "warning: --train-shards: windows of 129 tokens leave out 213 of the shards' 600 tokens (36%): the end of each shard shorter than a window is not read"},
		{"big_train.bin", ""},
	} {
		tr, _, err := datasets.LoadShards(filepath.Join(dir, tc.glob), "", 128, 50257)
		require.NoError(t, err)
		got := unreadWarning(tr)
		tr.Close()
		if tc.want == "" {
			assert.Empty(t, got, tc.glob)
		} else {
			assert.Contains(t, got, tc.want, tc.glob)
		}
	}
}

// A small GPT trains on a text file through the binary at 2 PEs: the
// validation loss falls, the replicas agree and a sample is printed.
func TestLanguageModelEndToEnd(t *testing.T) {
	bin := trainBinary(t)
	dir := t.TempDir()
	var sb strings.Builder
	for i := 0; sb.Len() < 200<<10; i++ {
		sb.WriteString("the quick brown fox jumps over the lazy dog ")
		sb.WriteByte(byte('a' + i%26))
		sb.WriteString("\n")
	}
	text := filepath.Join(dir, "corpus.txt")
	require.NoError(t, os.WriteFile(text, []byte(sb.String()), 0o644))
	cmd := exec.Command(bin, "--pes", "2", "--model", "gpt", "--layers", "2", "--width", "32", "--heads", "2",
		"--context", "32", "--data-dir", text, "--max-steps", "60", "--eval-every", "30", "--eval-batches", "4",
		"--lr", "3e-3", "--sample-tokens", "20", "--no-progress")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(dir, "cache")) // the corpus file goes there
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	files, err := filepath.Glob(filepath.Join(dir, "cache", "symddp", "text-*.bin"))
	require.NoError(t, err)
	assert.Len(t, files, 1, "one corpus file in the cache directory")
	assert.Contains(t, stderr.String(), "reading the text files of "+text+" into one corpus file, once (cached in "+filepath.Join(dir, "cache", "symddp")+")\n")
	assert.Contains(t, stderr.String(), "corpus of "+text+": 1 text file (0 binary skipped), 0.2 MB for training and 0.0 MB for validation, written in ")
	assert.Equal(t, 1, strings.Count(stderr.String(), "corpus of "), "said by the launcher, not by each PE")
	out := stdout.String()
	var vals []float64
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "val loss "); i >= 0 {
			f := strings.Fields(line[i+len("val loss "):])
			v, err := strconv.ParseFloat(strings.TrimSuffix(f[0], ","), 64)
			require.NoError(t, err, line)
			vals = append(vals, v)
		}
	}
	require.Len(t, vals, 2, "one validation at step 30, one at the end:\n%s", out)
	assert.Less(t, vals[1], vals[0], "the validation loss falls")
	assert.Less(t, vals[1], 3.0, "well below a uniform guess's ln 256 = 5.55")
	assert.Contains(t, out, "step 30: val loss")
	assert.Contains(t, out, "bits per byte")
	assert.Contains(t, out, "tokens/s")
	assert.Contains(t, out, "replicas identical")
	assert.Contains(t, out, "sample (temperature 0.8, top-k 40) after")
}
