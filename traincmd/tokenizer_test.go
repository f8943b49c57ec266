package traincmd

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTextWithGPT2Tokens: --dataset text for a model with GPT-2's
// vocabulary takes GPT-2's BPE by default (auto), reports no bits per byte
// (a token is several bytes) and samples text; a byte-level model refuses
// --tokenizer gpt2, whose ids it cannot take.
func TestTextWithGPT2Tokens(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text")
	require.NoError(t, os.Mkdir(text, 0o755))
	for i, s := range []string{"the quick brown fox jumps over the lazy dog. ", "func main() { fmt.Println(\"hello, world\") }\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(text, string(rune('a'+i))+".txt"), []byte(strings.Repeat(s, 400)), 0o644))
	}
	code, stdout, stderr := runTrain(t, []string{"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")},
		"--pes", "2", "--model", "gpt", "--vocab", "50304", "--layers", "1", "--width", "16", "--heads", "2", "--context", "16",
		"--data-dir", text, "--max-steps", "3", "--eval-batches", "1", "--sample-tokens", "5", "--no-progress")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "tokenizing "+text+" with gpt2's BPE once")
	assert.Regexp(t, `(?m)^corpus of `+regexp.QuoteMeta(text)+`: 2 text files \(0 binary skipped\), 0\.0 MB for training and 0\.0 MB for validation \([0-9]+ and [0-9]+ gpt2 tokens\), written in [0-9.]+s to `, stderr)
	assert.Equal(t, 1, strings.Count(stderr, "corpus of "), "said by the launcher, not by each PE")
	assert.Contains(t, stdout, "sample (gpt2 tokens, temperature 0.8, top-k 40) after \"")
	assert.NotContains(t, stdout, "bits per byte")
	assert.Contains(t, stdout, "val loss ")
	// the cached corpus is current: nothing to say
	code, _, stderr = runTrain(t, []string{"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")},
		"--pes", "1", "--model", "gpt", "--vocab", "50304", "--layers", "1", "--width", "16", "--heads", "2", "--context", "16",
		"--data-dir", text, "--max-steps", "1", "--eval-batches", "1", "--sample-tokens", "0", "--no-progress")
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "tokenizing ")
	assert.NotContains(t, stderr, "corpus of ")

	var out, errs bytes.Buffer
	code = run([]string{"--model", "gpt-tiny", "--tokenizer", "gpt2", "--data-dir", text}, &out, &errs)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs.String(), "--dataset text with --tokenizer gpt2 has 50257 tokens but model gpt-tiny a vocabulary of 256: use --tokenizer byte, or --vocab 50257 or more")
	errs.Reset()
	code = run([]string{"--model", "gpt-tiny", "--tokenizer", "bpe", "--data-dir", text}, &out, &errs)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs.String(), `--tokenizer "bpe": want auto, byte or gpt2`)
}

// TestTokenizerAdvice: a tokenizer with more tokens than the model's
// vocabulary is refused with advice that does not suggest what the run
// already uses (--vocab 100 used to say "use --tokenizer byte" to a run
// whose tokenizer was byte), and says when auto chose the tokenizer.
func TestTokenizerAdvice(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "llama-tiny", "--vocab", "100"},
			"--dataset text with --tokenizer byte (auto's choice) has 256 tokens but model llama-tiny a vocabulary of 100: use --vocab 256 or more"},
		{[]string{"--model", "llama-tiny", "--vocab", "100", "--tokenizer", "byte"},
			"--dataset text with --tokenizer byte has 256 tokens but model llama-tiny a vocabulary of 100: use --vocab 256 or more"},
		{[]string{"--model", "gpt-tiny", "--vocab", "300", "--tokenizer", "gpt2"},
			"--dataset text with --tokenizer gpt2 has 50257 tokens but model gpt-tiny a vocabulary of 300: use --tokenizer byte, or --vocab 50257 or more"},
	} {
		o, err := parseFlags(tc.args, &bytes.Buffer{})
		require.NoError(t, err)
		_, err = textTokenizer(o, o.vocab)
		assert.EqualError(t, err, tc.want, "%v", tc.args)
	}
}
