package traincmd

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
	"github.com/symddp/symddp/models"
)

// --recompute: a mode that is not one, a model without transformer blocks
// and gelu for a gpt or llama that the GPU would run in bf16 are one line
// and exit 2 before any PE starts; a llama on the CPU, a gpt or llama at
// --precision fp32 on the GPU, and block for a gpt or llama in bf16 take
// it.
func TestRecomputeUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "gpt-tiny", "--recompute", "full"}, `--recompute "full": want none, gelu or block`},
		{[]string{"--recompute", "block"}, "model mlp: recompute block: the mlp has no transformer blocks to recompute"},
		{[]string{"--model", "gpt2", "--backend", "nvshmem", "--recompute", "gelu"},
			"--recompute gelu: with --backend nvshmem and --precision auto model gpt2 runs in bf16, where the MLP's activation (a gpt's GELU, a llama's SwiGLU) is not recomputed: use --recompute block, or add --precision fp32 to recompute gelu in fp32"},
		{[]string{"--model", "gpt2", "--backend", "nvshmem", "--precision", "bf16", "--recompute", "gelu"},
			"--recompute gelu: with --backend nvshmem and --precision bf16 model gpt2 runs in bf16"},
		{[]string{"--model", "llama-tiny", "--backend", "nvshmem", "--recompute", "gelu"},
			"--recompute gelu: with --backend nvshmem and --precision auto model llama-tiny runs in bf16"},
		{[]string{"--list-models", "--recompute", "all"}, `--recompute "all": want none, gelu or block`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != 2 || !strings.Contains(lines[0], tc.want) || len(lines) != 2 || stdout.Len() != 0 {
			t.Errorf("train %s: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q (and the --help pointer)",
				strings.Join(tc.args, " "), code, stdout.String(), stderr.String(), tc.want)
		}
	}
	for _, args := range [][]string{
		{"--model", "llama-tiny", "--recompute", "gelu"},
		{"--model", "llama-tiny", "--backend", "nvshmem", "--precision", "fp32", "--recompute", "block"},
		{"--model", "gpt2", "--backend", "nvshmem", "--precision", "fp32", "--recompute", "block"},
		{"--model", "gpt2", "--backend", "nvshmem", "--precision", "fp32", "--recompute", "gelu"},
		{"--model", "gpt2", "--backend", "nvshmem", "--recompute", "block"},
		{"--model", "gpt2-xl", "--backend", "nvshmem", "--precision", "bf16", "--recompute", "block"},
		{"--model", "llama-tiny", "--backend", "nvshmem", "--recompute", "block"},
	} {
		rc := resolved(t, args...)
		assert.Equal(t, models.Recompute(args[len(args)-1]), rc.Recompute, args)
		assert.Equal(t, args[len(args)-1], rc.record(10, dataChoice{})["recompute"], "the checkpoint's record")
	}
}

// --list-models sizes the transformers for --recompute and gives the
// figure without it; by default it gives --recompute block's beside; in
// fp32 on the CPU and, for a model that runs in bf16 on the GPU, in bf16
// (gelu has no bf16 form: none's and block's there).
func TestRecomputeListModels(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Zero(t, run([]string{"--list-models", "--recompute", "block"}, &stdout, &stderr), stderr.String())
	assert.Regexp(t, `(?m)^gpt2 +124\.5M +10\.81 GiB at 16 samples a step, adamw, --recompute block \(31\.81 GiB without\) +4\.56 GiB at 16 samples a step, adamw, --recompute block \(8\.44 GiB without\)$`, stdout.String())
	assert.Regexp(t, `(?m)^gpt2-xl +1\.56B +38\.73 GiB at 16 samples a step, adamw, --recompute block \(226\.63 GiB without\) +31\.36 GiB at 16 samples a step, adamw, --recompute block \(65\.87 GiB without\)$`, stdout.String())
	assert.Regexp(t, `(?m)^mlp +269\.3K +3\.1 MiB \+ activations, sgd +-$`, stdout.String())
	stdout.Reset()
	require.Zero(t, run([]string{"--list-models"}, &stdout, &stderr), stderr.String())
	assert.Regexp(t, `(?m)^llama-124m +114\.2M +32\.41 GiB at 16 samples a step, adamw; --recompute block: 10\.72 GiB +7\.95 GiB at 16 samples a step, adamw; --recompute block: 4\.42 GiB$`, stdout.String())
	stdout.Reset()
	require.Zero(t, run([]string{"--list-models", "--recompute", "gelu"}, &stdout, &stderr), stderr.String())
	assert.Regexp(t, `(?m)^gpt2 +124\.5M +29\.75 GiB at 16 samples a step, adamw, --recompute gelu \(31\.81 GiB without\) +8\.44 GiB at 16 samples a step, adamw; --recompute block: 4\.56 GiB \(no --recompute gelu in bf16\)$`, stdout.String())
}

// A small GPT trained through the binary at 2 PEs ends on the same
// parameter hash with every --recompute; the header says the mode and the
// activations with and without it, and the checkpoint records the mode.
func TestRecomputeEndToEnd(t *testing.T) {
	bin := trainBinary(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "corpus.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("the quick brown fox jumps over the lazy dog\n", 3000)), 0o644))
	hash := regexp.MustCompile(`replicas identical on both PEs \(step 8, parameter hash ([0-9a-f]{16})\)`)
	var hashes []string
	for _, mode := range []string{"none", "gelu", "block"} {
		ckpt := filepath.Join(dir, "ckpt-"+mode)
		cmd := exec.Command(bin, "--pes", "2", "--model", "gpt", "--layers", "3", "--width", "32", "--heads", "2",
			"--context", "32", "--data-dir", text, "--max-steps", "8", "--eval-every", "0", "--eval-batches", "1",
			"--sample-tokens", "0", "--no-progress", "--recompute", mode, "--checkpoint-dir", ckpt)
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "--recompute %s\nstdout:\n%s\nstderr:\n%s", mode, stdout.String(), stderr.String())
		m := hash.FindStringSubmatch(stdout.String())
		require.NotNil(t, m, "--recompute %s: no hash in\n%s", mode, stdout.String())
		hashes = append(hashes, m[1])
		head := stderr.String()
		if mode == "none" {
			assert.Regexp(t, `activations: about [0-9.]+ MiB per PE \(8 sequences\), nothing recomputed \(--recompute block: [0-9.]+ MiB\)`, head)
		} else {
			assert.Regexp(t, `activations: about [0-9.]+ MiB per PE \(8 sequences\) with --recompute `+mode+`, [0-9.]+ MiB without`, head)
		}
		assert.Contains(t, recordedRecipe(t, ckpt), `"recompute":"`+mode+`"`)
	}
	assert.Equal(t, hashes[0], hashes[1], "gelu keeps the bits")
	assert.Equal(t, hashes[0], hashes[2], "block keeps the bits")
}

// recordedRecipe is the training state that the checkpoint in dir
// records (its safetensors metadata).
func recordedRecipe(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "a checkpoint in %s", dir)
	b, err := os.ReadFile(files[len(files)-1])
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(b)
	var h struct {
		Meta map[string]string `json:"__metadata__"`
	}
	require.NoError(t, json.Unmarshal(b[8:8+n], &h))
	return h.Meta["symddp"]
}

// The start-up header's activation line of a model that runs in bf16 (a
// gpt built on the emulated CUDA engine) gives the bf16 build's estimates
// and says bf16.
func TestActivationNoteBF16(t *testing.T) {
	o, err := parseFlags([]string{"--model", "gpt", "--layers", "2", "--width", "64", "--heads", "2", "--context", "64",
		"--backend", "nvshmem", "--recompute", "block"}, io.Discard)
	require.NoError(t, err)
	require.NoError(t, o.validate())
	cfg := o.modelConfig()
	m, err := models.New("gpt", cfg)
	require.NoError(t, err)
	e := cudatest.NewEmulated(cuda.Options{})
	specs := m.Params()
	offsets, n := models.Layout(specs)
	arena := e.Alloc(n).(*cuda.Tensor)
	a := compute.Arena{Dev: arena.DevicePtr(), N: n}
	views := make([]compute.Tensor, len(specs))
	for i, s := range specs {
		views[i] = e.View(a, offsets[i], s.Shape...)
	}
	require.NoError(t, m.Build(e, views, views, 4))
	require.Equal(t, compute.PrecisionBF16, m.(models.PrecisionSetter).Precision())
	none, err := models.New("gpt", models.Config{Layers: 2, Width: 64, Heads: 2, Context: 64, Precision: compute.PrecisionBF16})
	require.NoError(t, err)
	want := fmt.Sprintf("activations: about %s per PE (4 sequences, bf16) with --recompute block, %s without",
		memSize(m.(models.ActivationSizer).ActivationBytes(4)), memSize(none.(models.ActivationSizer).ActivationBytes(4)))
	assert.Equal(t, want, activationNote(o, m, cfg, 4))
	assert.Less(t, m.(models.ActivationSizer).ActivationBytes(4), none.(models.ActivationSizer).ActivationBytes(4))
}
