package traincmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// TestGPTFLOPsPerToken: GPT-2 124M by hand. N = wte 50304·768 + wpe
// 1024·768 + 12 layers of (12·768² + 13·768) + ln_f 2·768 = 124,475,904;
// 6N = 746,855,424 and 6·L·C·T = 6·12·768·1024 = 56,623,104, so
// 803,478,528 FLOPs per token (8.03e8).
func TestGPTFLOPsPerToken(t *testing.T) {
	m, err := models.New("gpt2", models.Config{})
	require.NoError(t, err)
	n := 0
	for _, p := range m.Params() {
		n += p.Size()
	}
	require.Equal(t, 124475904, n, "GPT-2 124M's parameters, the tied head counted once")
	assert.Equal(t, 803478528.0, m.(models.FLOPsCounter).FLOPsPerToken())
	// gpt-tiny: 842,496 parameters; 6N + 6·4·128·128
	tiny, err := models.New("gpt-tiny", models.Config{})
	require.NoError(t, err)
	assert.Equal(t, 6*842496.0+6*4*128*128, tiny.(models.FLOPsCounter).FLOPsPerToken())
}

func TestTablePeak(t *testing.T) {
	for _, tc := range []struct {
		device string
		p      compute.Precision
		want   float64
		ok     bool
	}{
		{"NVIDIA H200", compute.PrecisionBF16, 989, true},
		{"NVIDIA H200", compute.PrecisionF32, 67, true},
		{"NVIDIA H100 80GB HBM3", compute.PrecisionBF16, 989, true},
		{"NVIDIA H100 PCIe", compute.PrecisionBF16, 756, true},
		{"NVIDIA A100-SXM4-80GB", compute.PrecisionF32, 19.5, true},
		{"NVIDIA H100 NVL", compute.PrecisionBF16, 0, false},
		{"", compute.PrecisionF32, 0, false},
	} {
		got, ok := tablePeak(tc.device, tc.p)
		assert.Equal(t, tc.want, got, "%s %s", tc.device, tc.p)
		assert.Equal(t, tc.ok, ok, "%s %s", tc.device, tc.p)
	}
}

// bf16Engine is an engine that says it computes in bf16 (what auto looks
// for); nothing is called on it.
type bf16Engine struct {
	compute.Engine
	compute.BF16Tensors
}

// TestNewMFU: the peak is the table's for a known GPU at the precision the
// run computes in, times the devices; --peak-tflops wins; a CPU run or an
// unknown GPU has none; an mlp has no MFU at all.
func TestNewMFU(t *testing.T) {
	gpt, err := models.New("gpt2", models.Config{})
	require.NoError(t, err)
	auto := &options{precision: "auto"}
	m := newMFU(auto, gpt, bf16Engine{}, "NVIDIA H200", 1)
	assert.Equal(t, compute.PrecisionBF16, m.precision, "auto on an engine that computes in bf16")
	assert.Equal(t, 989e12, m.peak)
	assert.Equal(t, "bf16 dense peak of NVIDIA H200", m.peakSource)
	v, ok := m.of(500000)
	assert.True(t, ok)
	assert.InDelta(t, 500000*803478528.0/989e12, v, 1e-15)
	assert.Equal(t, ", MFU 40.6%", m.suffix(500000))

	m = newMFU(auto, gpt, nil, "NVIDIA H200", 8) // no bf16: fp32, on 8 GPUs
	assert.Equal(t, compute.PrecisionF32, m.precision)
	assert.Equal(t, 8*67e12, m.peak)
	assert.Equal(t, "fp32 dense peak of 8 NVIDIA H200s", m.peakSource)

	m = newMFU(&options{precision: "fp32"}, gpt, bf16Engine{}, "NVIDIA H200", 1)
	assert.Equal(t, compute.PrecisionF32, m.precision, "--precision fp32 on an engine that could compute in bf16")

	m = newMFU(&options{precision: "auto", peakTFLOPS: 2}, gpt, nil, "", 1)
	assert.Equal(t, 2e12, m.peak, "--peak-tflops on the CPU")
	assert.Equal(t, "--peak-tflops", m.peakSource)

	for _, dev := range []string{"", "NVIDIA H100 NVL"} {
		m = newMFU(auto, gpt, nil, dev, 1)
		_, ok = m.of(1000)
		assert.False(t, ok, "no peak for %q", dev)
		assert.Equal(t, "", m.suffix(1000))
		assert.Equal(t, 803478528.0, m.flopsPerToken)
	}
	mlp, err := models.New("mlp", models.Config{})
	require.NoError(t, err)
	assert.Equal(t, mfuInfo{}, newMFU(auto, mlp, nil, "NVIDIA H200", 1))
}

// TestPrecisionErrors: a precision the run cannot have is one line and
// exit 2 before any PE starts.
func TestPrecisionErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "gpt-tiny", "--precision", "bf16"}, "--precision bf16 needs the GPU engine (--backend nvshmem); the CPU engine computes in fp32"},
		{[]string{"--model", "gpt-tiny", "--backend", "shm", "--precision", "bf16"}, "--precision bf16 needs the GPU engine (--backend nvshmem); the CPU engine computes in fp32"},
		{[]string{"--model", "mlp", "--precision", "bf16"}, "--precision bf16: the MLP trains in fp32"},
		{[]string{"--model", "mlp", "--backend", "nvshmem", "--precision", "bf16"}, "--precision bf16: the MLP trains in fp32"},
		{[]string{"--model", "gpt-tiny", "--precision", "fp16"}, `--precision "fp16": want auto, bf16 or fp32`},
		{[]string{"--data-on-device", "maybe"}, `--data-on-device "maybe": want auto, on or off`},
		{[]string{"--grad-dtype", "fp16"}, `--grad-dtype "fp16": want fp32 or bf16`},
		{[]string{"--grad-dtype", "bf16"}, "--grad-dtype bf16 needs the GPU step path (--backend nvshmem)"},
		{[]string{"--model", "gpt-tiny", "--peak-tflops", "-1"}, "--peak-tflops -1: want a positive peak"},
		{[]string{"--model", "gpt-tiny", "--peak-tflops", "0"}, "--peak-tflops 0: want a positive peak"},
		{[]string{"--model", "mlp", "--peak-tflops", "989"}, "--peak-tflops: MFU is printed for the language models"},
		{[]string{"--model", "gpt-tiny", "--dataset", "synthetic", "--data-dir", "/tmp"}, "not to --dataset synthetic, which makes its tokens"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != 2 || !strings.Contains(lines[0], tc.want) || len(lines) != 2 {
			t.Errorf("train %s: exit %d, stderr %q; want exit 2 and one line containing %q (and the --help pointer)",
				strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
	}
	// fp32 and auto are what the mlp and the CPU engine run.
	for _, args := range [][]string{{"--model", "mlp", "--precision", "fp32"}, {"--model", "gpt-tiny", "--precision", "auto"}, {"--model", "gpt-tiny", "--precision", "fp32"}} {
		o, err := parseFlags(args, &bytes.Buffer{})
		require.NoError(t, err)
		assert.NoError(t, o.validate(), "%v", args)
	}
	o, err := parseFlags([]string{"--model", "gpt2", "--precision", "bf16", "--backend", "nvshmem"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.NoError(t, o.validate())
	assert.Equal(t, compute.PrecisionBF16, o.modelConfig().Precision, "--precision reaches models.Config")
	o, _ = parseFlags([]string{"--model", "gpt2"}, &bytes.Buffer{})
	assert.Equal(t, compute.PrecisionAuto, o.modelConfig().Precision)
}

// TestHelpSaysPrecisionAndPeaks: --help says what each precision does and
// that the table's peaks are dense ones.
func TestHelpSaysPrecisionAndPeaks(t *testing.T) {
	var stdout bytes.Buffer
	require.Equal(t, 0, run([]string{"--help"}, &stdout, &bytes.Buffer{}))
	help := strings.Join(strings.Fields(stdout.String()), " ")
	for _, want := range []string{"--precision string", "auto (bf16 where the engine has a bf16 form of every layer of the model", "fp32 (fp32 throughout",
		"bf16 (bf16 activations and GEMMs accumulating in fp32, fp32 master weights", "--peak-tflops", "dense (not sparse) peak", "H200 and H100 SXM: bf16 989, fp32 67"} {
		assert.Contains(t, help, want)
	}
}

// TestSyntheticTokensMFUInMetrics: a language model on synthetic tokens
// trains in-process on the CPU (the loss stays near ln 256: the tokens are
// random), and with --peak-tflops its metrics log carries the MFU of every
// window and of the run, equal to tokens/s × FLOPs per token / peak.
func TestSyntheticTokensMFUInMetrics(t *testing.T) {
	metrics := filepath.Join(t.TempDir(), "m.jsonl")
	var stdout, stderr bytes.Buffer
	code := run([]string{"--model", "gpt", "--layers", "1", "--heads", "2", "--width", "32", "--context", "16",
		"--dataset", "synthetic", "--batch-size", "8", "--max-steps", "4", "--log-every", "2", "--eval-batches", "1",
		"--sample-tokens", "0", "--no-progress", "--threads", "1", "--peak-tflops", "0.001", "--metrics", metrics}, &stdout, &stderr)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stderr.String(), "MFU against 0.001 TFLOP/s (--peak-tflops)")
	assert.Regexp(t, `step 2/4 loss \S+ lr \S+ \d+ tokens/s, MFU \d+\.\d%`, stdout.String())
	assert.Regexp(t, `done: 4 steps in \S+, \d+ tokens/s on 1 PE \(shm, cpu/\S+\), MFU \d+\.\d%`, stdout.String())
	assert.NotContains(t, stdout.String(), "bits per byte", "synthetic tokens are not bytes of text")
	// 1 layer, C 32, T 16, V 256: wte 8192 + wpe 512 + 12·32² + 13·32 + ln_f 64
	n := 256*32 + 16*32 + 12*32*32 + 13*32 + 2*32
	flops := 6*float64(n) + 6*1*32*16
	b, err := os.ReadFile(metrics)
	require.NoError(t, err)
	var windows int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		tps, _ := m["tokens_per_sec"].(float64)
		mfu, ok := m["mfu"].(float64)
		require.True(t, ok, "no mfu in %s", line)
		assert.InDelta(t, tps*flops/1e9, mfu, 1e-12*mfu, line)
		if m["final"] == true {
			assert.Equal(t, flops, m["flops_per_token"])
			assert.Equal(t, 1e9, m["peak_flops"])
			assert.Equal(t, "fp32", m["precision"])
			assert.InDelta(t, math.Log(256), m["val_loss"].(float64), 0.1, "random tokens: the loss stays near ln 256")
		} else {
			windows++
		}
	}
	assert.Equal(t, 2, windows)
}

// TestMemoryCheckIsTheHostsOnTheCPU: a batch whose activations do not fit
// in the host's memory is refused on the CPU, not on the GPU, whose
// activations are in device memory.
func TestMemoryCheckIsTheHostsOnTheCPU(t *testing.T) {
	if memAvailable() <= 0 {
		t.Skip("no /proc/meminfo")
	}
	g, err := models.New("gpt2", models.Config{})
	require.NoError(t, err)
	huge := int(memAvailable()/g.(models.ActivationSizer).ActivationBytes(1)) + 16 // sequences beyond the host's memory
	o := &options{pes: 1, accumulate: 1, batch: huge, model: "gpt2", backend: "auto", recipe: recipe{Optimizer: "adamw"}}
	err = checkMemory(o, g, 1024)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GiB of activations")
	assert.Contains(t, err.Error(), "recompute activations with --recompute block")
	o.backend = "nvshmem"
	assert.NoError(t, checkMemory(o, g, 1024))
}

// TestMemoryCheckSumsItsParts: the PEs' activations and their weights,
// gradients and optimizer state are refused together when each would fit
// the host alone but their sum does not (each used to be checked alone,
// and such a run started, swapped and was killed part-way).
func TestMemoryCheckSumsItsParts(t *testing.T) {
	avail := memAvailable()
	if avail <= 64<<20 {
		t.Skip("no /proc/meminfo, or too little memory to split")
	}
	base, err := models.New("gpt-tiny", models.Config{})
	require.NoError(t, err)
	// Two PEs at one sequence each; each PE's state and activations are
	// 30% of the host's memory: 60% for either alone, 120% together.
	part := avail * 3 / 10
	m := sizedLM{Model: base, params: int(part / 16), act: part} // AdamW: 16 bytes a parameter
	o := &options{pes: 2, accumulate: 1, batch: 2, model: "sized", backend: "shm", recipe: recipe{Optimizer: "adamw"}}
	err = checkMemory(o, m, 64)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "model sized at 1 sequences of 64 tokens per PE needs about ")
	assert.Contains(t, err.Error(), fmt.Sprintf("(%.1f GiB of activations, %.1f GiB of weights, gradients and optimizer state, and the program;",
		gib(part), gib(int64(part/16)*16)))
	// Either part alone, with the other small, fits.
	assert.NoError(t, checkMemory(o, sizedLM{Model: base, params: int(part / 16), act: 1 << 20}, 64))
	assert.NoError(t, checkMemory(o, sizedLM{Model: base, params: 1 << 16, act: part}, 64))
	// SGD without momentum keeps no state: the same parameters take half
	// the bytes (weights and gradients), and fit beside the activations.
	o.recipe.Optimizer, o.recipe.Hyper = "sgd", optim.Config{}
	assert.NoError(t, checkMemory(o, m, 64))
}

// sizedLM is a language model of the given parameter count and activation
// bytes a sequence, for the memory checks.
type sizedLM struct {
	models.Model
	params int
	act    int64
}

func (s sizedLM) Params() []models.ParamSpec {
	return []models.ParamSpec{{Name: "w", Shape: []int{s.params}}}
}
func (s sizedLM) ActivationBytes(seqs int) int64 { return s.act * int64(seqs) }
