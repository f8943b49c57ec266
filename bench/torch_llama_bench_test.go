package bench_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
)

// torchLlama runs torch_llama_bench.py with args under /usr/bin/python3
// (skipping the test where that Python has no torch) and returns its
// stdout; a non-zero exit fails the test.
func torchLlama(t *testing.T, args ...string) string {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("no PyTorch for /usr/bin/python3 (Debian's python3-torch): %v", err)
	}
	cmd := exec.Command("/usr/bin/python3", append([]string{"torch_llama_bench.py"}, args...)...)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "PYTHONDONTWRITEBYTECODE=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "torch_llama_bench.py %s: %s%s", strings.Join(args, " "), out, stderr.String())
	return string(out)
}

// torchParams is what --param-count says of one model.
type torchParams struct {
	nParams, flops int64
	params         []string // "name d0,d1", in order
}

func parseParamCount(t *testing.T, out string) map[string]*torchParams {
	t.Helper()
	res := map[string]*torchParams{}
	var cur *torchParams
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "PARAM "); ok {
			require.NotNil(t, cur, "PARAM before PARAMS: %s", line)
			cur.params = append(cur.params, rest)
			continue
		}
		rest, ok := strings.CutPrefix(line, "PARAMS torch_llama model=llama ")
		require.True(t, ok, "unexpected line %q", line)
		kv := map[string]string{}
		for _, f := range strings.Fields(rest) {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		cur = &torchParams{}
		var err error
		cur.nParams, err = strconv.ParseInt(kv["n_params"], 10, 64)
		require.NoError(t, err, line)
		cur.flops, err = strconv.ParseInt(kv["flops_per_token"], 10, 64)
		require.NoError(t, err, line)
		res[kv["preset"]] = cur
	}
	return res
}

// symddpParams is the same description of symddp's model.
func symddpParams(t *testing.T, name string, cfg models.Config) torchParams {
	t.Helper()
	m, err := models.New(name, cfg)
	require.NoError(t, err)
	var p torchParams
	for _, s := range m.Params() {
		dims := make([]string, len(s.Shape))
		for i, d := range s.Shape {
			dims[i] = strconv.Itoa(d)
		}
		p.params = append(p.params, s.Name+" "+strings.Join(dims, ","))
		p.nParams += int64(s.Size())
	}
	p.flops = int64(m.(models.FLOPsCounter).FLOPsPerToken())
	return p
}

// The PyTorch peer's model has symddp's parameters, by name, shape and
// order, so its count and FLOPs per token (hence its MFU) are
// models.Llama's, for every preset and for sizes given by flags (SwiGLU's
// width by Meta's rule: multiple 32 from the tiny preset, 256 from the
// others).
func TestTorchLlamaParams(t *testing.T) {
	got := parseParamCount(t, torchLlama(t, "--param-count", "--preset", "tiny,llama-124m,llama3-1b"))
	for torchName, name := range map[string]string{"tiny": "llama-tiny", "llama-124m": "llama-124m", "llama3-1b": "llama3-1b"} {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, got, torchName)
			want := symddpParams(t, name, models.Config{})
			assert.Equal(t, want.params, got[torchName].params)
			assert.Equal(t, want.nParams, got[torchName].nParams)
			assert.Equal(t, want.flops, got[torchName].flops)
		})
	}
	assert.Equal(t, int64(803_968), got["tiny"].nParams)
	assert.Equal(t, int64(1_235_814_400), got["llama3-1b"].nParams, "Llama 3.2 1B's count")

	for _, c := range []struct {
		name  string
		cfg   models.Config
		flags []string
	}{
		{"llama", models.Config{Width: 256}, []string{"--preset", "llama", "--width", "256"}},
		{"llama-124m", models.Config{Layers: 2, Heads: 4, KVHeads: 1, Width: 256, Context: 64, Vocab: 1000, RopeTheta: 500000},
			[]string{"--preset", "llama-124m", "--layers", "2", "--heads", "4", "--kv-heads", "1", "--width", "256", "--context", "64", "--vocab", "1000", "--rope-theta", "500000"}},
	} {
		t.Run("custom-"+c.name, func(t *testing.T) {
			got := parseParamCount(t, torchLlama(t, append([]string{"--param-count"}, c.flags...)...))
			require.Contains(t, got, "custom")
			want := symddpParams(t, c.name, c.cfg)
			assert.Equal(t, want.params, got["custom"].params)
			assert.Equal(t, want.nParams, got["custom"].nParams)
			assert.Equal(t, want.flops, got["custom"].flops)
		})
	}
}

// checkReport is --check-arena's JSON line.
type checkReport struct {
	NParams     int     `json:"n_params"`
	MaxAbsDiff  float64 `json:"max_abs_diff"`
	MaxAbsLogit float64 `json:"max_abs_logit"`
	Rel         float64
	ArgmaxLast  int `json:"argmax_last"`
	OK          bool
}

// writeFloats writes v as float32 little-endian.
func writeFloats(t *testing.T, path string, v []float32) {
	t.Helper()
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// llamaLogits are symddp's CPU engine's logits (len(tokens), V) of the
// model over arena.
func llamaLogits(t *testing.T, m models.LanguageModel, arena []float32, tokens []int32) []float32 {
	t.Helper()
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(t, err)
	s, err := models.NewSampler(m, e, arena)
	require.NoError(t, err)
	T, V := m.Data().Input[0], m.Data().Classes
	toks, none := make([]int32, T), make([]int32, T)
	copy(toks, tokens)
	for i := range none {
		none[i] = -1
	}
	in := models.Inputs{Tokens: e.AllocLabels(T), Targets: e.AllocLabels(T)}
	e.SetLabels(in.Tokens, toks)
	e.SetLabels(in.Targets, none)
	s.Forward(in, 1, e.Alloc(3))
	l, ok := s.(interface{ Logits() compute.Tensor })
	require.True(t, ok)
	return append([]float32(nil), compute.HostData(l.Logits())[:len(tokens)*V]...)
}

// The PyTorch peer's forward is symddp's: loaded with a symddp arena (in
// symddp's parameter order), it computes in float64 the logits that the
// CPU engine computes in fp32, within 1e-5 of the largest, and the same
// most likely next token. The weights are of unit scale (not the
// initialisation's 0.02), so that attention is far from uniform and a
// wrong RoPE pairing or key/value grouping shows.
func TestTorchLlamaForward(t *testing.T) {
	for _, c := range []struct {
		name  string
		model string
		cfg   models.Config
		flags []string
	}{
		// untied, 2 query heads per key/value head, theta 10000
		{"llama-tiny", "llama-tiny", models.Config{}, []string{"--preset", "tiny"}},
		// tied, 4 query heads on one key/value head, Llama 3's theta
		{"tied-mqa", "llama-124m", models.Config{Layers: 2, Heads: 4, KVHeads: 1, Width: 32, FFNHidden: 64, Context: 16, Vocab: 300, RopeTheta: 500000},
			[]string{"--preset", "llama-124m", "--layers", "2", "--heads", "4", "--kv-heads", "1", "--width", "32", "--ffn", "64",
				"--context", "16", "--vocab", "300", "--rope-theta", "500000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mm, err := models.New(c.model, c.cfg)
			require.NoError(t, err)
			m := mm.(models.LanguageModel)
			specs := m.Params()
			offsets, n := models.Layout(specs)
			arena := make([]float32, n)
			rng := rand.New(rand.NewPCG(7, 11))
			for i, s := range specs {
				v := arena[offsets[i] : offsets[i]+s.Size()]
				for j := range v {
					if len(s.Shape) == 1 { // a norm's gain
						v[j] = float32(1 + 0.3*rng.NormFloat64())
					} else { // (out, in): unit-variance outputs
						v[j] = float32(rng.NormFloat64() / math.Sqrt(float64(s.Shape[1])))
					}
				}
			}
			tokens := []int32{3, 17, 200, 42, 9, 255, 1, 128, 77, 5, 250}
			ours := llamaLogits(t, m, arena, tokens)
			V := m.Data().Classes
			last := ours[(len(tokens)-1)*V:]
			argmax := 0
			for j, x := range last {
				if x > last[argmax] {
					argmax = j
				}
			}

			dir := t.TempDir()
			arenaFile, logitsFile := filepath.Join(dir, "arena.f32"), filepath.Join(dir, "logits.f32")
			writeFloats(t, arenaFile, arena)
			writeFloats(t, logitsFile, ours)
			ids := make([]string, len(tokens))
			for i, x := range tokens {
				ids[i] = strconv.Itoa(int(x))
			}
			out := torchLlama(t, append([]string{"--check-arena", arenaFile, "--tokens", strings.Join(ids, ","),
				"--logits", logitsFile, "--rtol", "1e-5"}, c.flags...)...)
			t.Logf("torch_llama_bench.py --check-arena: %s", strings.TrimSpace(out))
			var r checkReport
			require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &r), out)
			assert.True(t, r.OK)
			assert.Equal(t, n, r.NParams)
			assert.Greater(t, r.MaxAbsLogit, 1.0, "logits of unit-scale weights")
			assert.Equal(t, argmax, r.ArgmaxLast, "PyTorch's most likely next token is symddp's")
		})
	}
}

// A mismatched arena (another model's parameters) is exit 2 and one line.
func TestTorchLlamaCheckArenaSize(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("no PyTorch for /usr/bin/python3 (Debian's python3-torch): %v", err)
	}
	dir := t.TempDir()
	arenaFile, logitsFile := filepath.Join(dir, "arena.f32"), filepath.Join(dir, "logits.f32")
	writeFloats(t, arenaFile, make([]float32, 10))
	writeFloats(t, logitsFile, make([]float32, 256))
	cmd := exec.Command("/usr/bin/python3", "torch_llama_bench.py", "--check-arena", arenaFile, "--tokens", "1", "--logits", logitsFile)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Equal(t, "torch_llama_bench.py: --check-arena "+arenaFile+": 10 floats, the model has 803968 parameters\n", string(out))
}

// TestTorchLlamaTrain: bench/torch_llama_train.py, the PyTorch side of the
// Llama loss-parity check, reads llm.c shards that datasets.ShardWriter
// wrote (byte tokens of Go source, the tiny preset's vocabulary) and
// trains: its validation loss after 8 steps is below the untrained
// model's, which is about ln 256 = 5.55 (a uniform guess over the bytes).
func TestTorchLlamaTrain(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("no PyTorch for /usr/bin/python3 (Debian's python3-torch): %v", err)
	}
	dir := t.TempDir()
	w, err := datasets.NewShardWriter(dir, "src", 1<<20, 256)
	require.NoError(t, err)
	text, err := os.ReadFile("torch_llama_bench.py")
	require.NoError(t, err)
	tokens := make([]int32, len(text))
	for i, b := range text {
		tokens[i] = int32(b)
	}
	require.NoError(t, w.Write(true, tokens[:len(tokens)/5]))
	require.NoError(t, w.Write(false, tokens[len(tokens)/5:]))
	_, err = w.Close()
	require.NoError(t, err)
	cmd := exec.Command("/usr/bin/python3", "torch_llama_train.py", "--device", "cpu", "--preset", "tiny", "--mode", "fp32",
		"--train-shards", filepath.Join(dir, "src_train_*.bin"), "--val-shards", filepath.Join(dir, "src_val_*.bin"),
		"--steps", "8", "--batch", "4", "--warmup", "2", "--lr", "3e-3", "--eval-every", "4", "--eval-batches", "2")
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "PYTHONDONTWRITEBYTECODE=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "torch_llama_train.py: %s%s", out, stderr.String())
	var evals []float64
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "EVAL torch_llama_train "); ok {
			for _, f := range strings.Fields(rest) {
				if v, ok := strings.CutPrefix(f, "val_loss="); ok {
					x, err := strconv.ParseFloat(v, 64)
					require.NoError(t, err, line)
					evals = append(evals, x)
				}
			}
		}
	}
	require.Len(t, evals, 2, "validation at steps 4 and 8:\n%s", out)
	assert.Less(t, evals[1], math.Log(256)-0.5, "validation loss after 8 steps")
	assert.Contains(t, string(out), "RESULT torch_llama_train preset=tiny steps=8 batch=4 context=128 mode=fp32 device=cpu val_loss=")
}
