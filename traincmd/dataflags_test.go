package traincmd

import (
	"bytes"
	"strings"
	"testing"
)

// TestDataFlagsRefused: a data flag the dataset does not read is one line
// naming the flag, the datasets that read it and what this one reads, and
// exit 2 before any PE starts, the same way for every dataset.
func TestDataFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "gpt-tiny", "--dataset", "synthetic", "--tokenizer", "gpt2"},
			"train: --tokenizer applies to --dataset text, not to --dataset synthetic, which makes its tokens"},
		{[]string{"--model", "gpt-tiny", "--dataset", "synthetic", "--corpus-max", "1MiB"},
			"train: --corpus-max applies to --dataset text, not to --dataset synthetic, which makes its tokens"},
		{[]string{"--model", "gpt-tiny", "--dataset", "synthetic", "--data-dir", "/tmp"},
			"train: --data-dir applies to --dataset fashion-mnist, mnist, text and datasets a program registers, not to --dataset synthetic, which makes its tokens"},
		{[]string{"--model", "gpt-tiny", "--dataset", "llmc", "--train-shards", "/nonexistent/a", "--val-shards", "/nonexistent/b", "--corpus-max", "1MiB"},
			"train: --corpus-max applies to --dataset text, not to --dataset llmc, which reads the token shards of --train-shards and --val-shards"},
		{[]string{"--model", "gpt-tiny", "--dataset", "llmc", "--train-shards", "a", "--val-shards", "b", "--data-dir", "/nonexistent"},
			"train: --data-dir applies to --dataset fashion-mnist, mnist, text and datasets a program registers, not to --dataset llmc, which reads the token shards"},
		{[]string{"--model", "gpt-tiny", "--dataset", "llmc", "--train-shards", "a", "--val-shards", "b", "--tokenizer", "gpt2"},
			"train: --tokenizer applies to --dataset text, not to --dataset llmc"},
		{[]string{"--model", "gpt-tiny", "--train-shards", "a"},
			"train: --train-shards applies to --dataset llmc, not to --dataset text, which reads --data-dir with --corpus-max and --tokenizer"},
		{[]string{"--model", "mlp", "--dataset", "synthetic", "--tokenizer", "gpt2"},
			"train: --tokenizer applies to --dataset text, not to --dataset synthetic, which makes its samples (--train-limit takes the first N)"},
		{[]string{"--model", "mlp", "--dataset", "synthetic", "--data-dir", "/tmp"},
			"train: --data-dir applies to --dataset fashion-mnist, mnist, text and datasets a program registers, not to --dataset synthetic, which makes its samples"},
		{[]string{"--model", "mlp", "--corpus-max", "1MiB"},
			"train: --corpus-max applies to --dataset text, not to --dataset fashion-mnist, which reads its IDX files from --data-dir"},
		{[]string{"--model", "mlp", "--dataset", "mnist", "--val-shards", "b"},
			"train: --val-shards applies to --dataset llmc, not to --dataset mnist"},
		{[]string{"--model", "mlp", "--dataset", "synthetic", "--data-opt", "noise=3"},
			"train: --data-opt applies to datasets a program registers (datasets.Register, docs/LIBRARY.md), not to the built-in --dataset synthetic, which makes its samples"},
		{[]string{"--model", "gpt-tiny", "--dataset", "synthetic", "--data-opt", "noise=3"},
			"train: --data-opt applies to datasets a program registers (datasets.Register, docs/LIBRARY.md), not to the built-in --dataset synthetic, which makes its tokens"},
		{[]string{"--model", "gpt-tiny", "--data-opt", "noise=3"},
			"train: --data-opt applies to datasets a program registers (datasets.Register, docs/LIBRARY.md), not to the built-in --dataset text, which reads --data-dir with --corpus-max and --tokenizer"},
	} {
		if line, ok := usageRefusal(tc.args...); !ok || !strings.HasPrefix(line, tc.want) {
			t.Errorf("train %s: %q; want exit 2 and one line starting %q (and the --help pointer)", strings.Join(tc.args, " "), line, tc.want)
		}
	}
}

// usageRefusal runs train with args, cut short should it train (one step,
// no sample), and returns the first line of its stderr and whether that is
// all it wrote besides the --help pointer, with exit 2.
func usageRefusal(args ...string) (line string, ok bool) {
	var stdout, stderr bytes.Buffer
	code := run(append(args, "--max-steps", "1", "--sample-tokens", "0", "--no-progress"), &stdout, &stderr)
	line, rest, _ := strings.Cut(stderr.String(), "\n")
	return line, code == 2 && rest == helpLine()
}

// TestDataFlagsRead: the flags a dataset reads pass the check.
func TestDataFlagsRead(t *testing.T) {
	for _, args := range [][]string{
		{"--model", "gpt-tiny", "--data-dir", "/tmp", "--corpus-max", "1MiB", "--tokenizer", "byte"},
		{"--model", "gpt-tiny", "--dataset", "llmc", "--train-shards", "a", "--val-shards", "b"},
		{"--model", "mlp", "--data-dir", "/tmp", "--train-limit", "100"},
		{"--model", "mlp", "--dataset", "synthetic", "--train-limit", "100"},
	} {
		o, err := parseFlags(args, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if err := o.validate(); err != nil {
			t.Errorf("train %s: %v; want no error", strings.Join(args, " "), err)
		}
	}
}
