package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseGPTGPUConfig(t *testing.T) {
	for in, want := range map[string]gptGPUConfig{"gpt2/16": {preset: "gpt2", batch: 16}, "tiny/64": {preset: "tiny", batch: 64}, "gpt-tiny/8": {preset: "tiny", batch: 8}, "small/64": {preset: "small", batch: 64},
		"xl/16": {preset: "xl", batch: 16}, "gpt2-xl/16": {preset: "xl", batch: 16}, "gpt2-medium/16": {preset: "medium", batch: 16}, "large/8": {preset: "large", batch: 8},
		"llama-124m/16": {preset: "llama-124m", batch: 16}, "llama3-1b/8": {preset: "llama3-1b", batch: 8}, "llama-tiny/64": {preset: "llama-tiny", batch: 64}} {
		if got, err := parseGPTGPUConfig(in); err != nil || got != want {
			t.Errorf("parseGPTGPUConfig(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if got, err := parseGPTGPUConfig("llama3-1b/max"); err != nil || got != (gptGPUConfig{preset: "llama3-1b", fit: true}) {
		t.Errorf("parseGPTGPUConfig(llama3-1b/max) = %+v, %v", got, err)
	}
	for _, bad := range []string{"gpt2", "gpt2/0", "gpt3/16", "gpt2/x", "", "llama/16", "llama3-8b/1", "gpt3/max", "gpt2/MAX", "gpt2/max"} {
		if _, err := parseGPTGPUConfig(bad); err == nil {
			t.Errorf("parseGPTGPUConfig(%q) succeeded", bad)
		}
	}
}

// gptMetrics is a metrics log of train at batch b: logs every 20 steps to
// step 120, each window of 20·b sequences of 1024 tokens taking window
// seconds, and the final record with the FLOPs per token and the peak.
func gptMetrics(b int, window float64, final string) []byte {
	var sb strings.Builder
	for step := 20; step <= 120; step += 20 {
		fmt.Fprintf(&sb, `{"accuracy":0,"elapsed":%g,"epoch":1,"loss":10.9,"lr":0.0006,"samples_per_sec":%g,"step":%d,"tokens_per_sec":1}`+"\n",
			2+window*float64(step/20), float64(20*b)/window, step)
	}
	sb.WriteString(final + "\n")
	return []byte(sb.String())
}

const (
	gptFinal     = `{"elapsed":9,"final":true,"flops_per_token":803478528,"mfu":0.3,"peak_flops":989000000000000,"precision":"bf16","device_bytes":9663676416,"replicas_identical":true,"samples_per_sec":400,"step":120,"stopped":false,"tokens_per_sec":409600,"val_loss":10.9,"val_tokens":16384}`
	gptGPUStderr = `msg="compute engine" engine=cuda/cublas gpu="NVIDIA H200 (device 0, 132 SMs), fp32 SGEMM without TF32, Linear layers fused into cuBLASLt epilogues, shared stream"
msg="model gpt2: fused bf16 GPT: 12 layers, flash attention, cuBLASLt bf16 GEMMs"
training gpt2: 124475904 parameters, 1 PE (nvshmem, cuda/cublas), global batch 16 (16 per PE per micro-batch), 120 steps
`
	torchGPT2Out = `torch 2.11.0+cu130, NVIDIA H200, steps 20, warm-up 5
RESULT torch_gpt preset=gpt2 layers=12 heads=12 width=768 context=1024 vocab=50304 batch=16 mode=eager ms_per_step=46.81 tokens_per_s=350000 mfu=0.284 n_params=124475904 flops_per_token=8.035e+08 peak_mem_gib=30.10 loss=10.9000 warmup_s=3.1 steps=20
RESULT torch_gpt preset=gpt2 layers=12 heads=12 width=768 context=1024 vocab=50304 batch=32 mode=eager ms_per_step=91.02 tokens_per_s=360000 mfu=0.292 n_params=124475904 flops_per_token=8.035e+08 peak_mem_gib=58.20 loss=10.9000 warmup_s=3.9 steps=20
RESULT torch_gpt preset=gpt2 layers=12 heads=12 width=768 context=1024 vocab=50304 batch=16 mode=compile ms_per_step=32.77 tokens_per_s=500000 mfu=0.406 n_params=124475904 flops_per_token=8.035e+08 peak_mem_gib=20.00 loss=10.9000 warmup_s=61.0 steps=20
RESULT torch_gpt preset=gpt2 layers=12 heads=12 width=768 context=1024 vocab=50304 batch=32 mode=compile ms_per_step=69.72 tokens_per_s=470000 mfu=0.382 n_params=124475904 flops_per_token=8.035e+08 peak_mem_gib=39.00 loss=10.9000 warmup_s=55.0 steps=20
`
)

func gpuGPTTestOpts(t *testing.T, args ...string) gpuGPTOpts {
	t.Helper()
	script := filepath.Join(t.TempDir(), "torch_gpt_bench.py")
	if err := os.WriteFile(script, []byte("# stands in for the script\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseGPUGPTFlags(append([]string{"--torch-script", script}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestGPUGPTTable: tokens/s over the timed steps and MFU from train's
// metrics logs, PyTorch's columns from its RESULT lines (one script run per
// model, for all its batches), the ratio to torch.compile against the
// 1.1x target; a later configuration whose train run fails is a row that
// says so, and, with PyTorch's ERROR line, an error at the end.
func TestGPUGPTTable(t *testing.T) {
	o := gpuGPTTestOpts(t, "--configs", "gpt2/16,gpt2/32,tiny/64")
	var trained, torched []string
	o.train = func(_ context.Context, args []string) (string, []byte, error) {
		trained = append(trained, strings.Join(args, " "))
		switch {
		case slices.Contains(args, "gpt-tiny"):
			return "train: out of GPU memory\n", nil, errors.New("exit status 1")
		case slices.Contains(args, "32"):
			// 20·32·1024 tokens in 1.25 s: 524288 tokens/s
			return gptGPUStderr, gptMetrics(32, 1.25, gptFinal), nil
		}
		// 20·16·1024 tokens in 0.64 s: 512000 tokens/s
		return gptGPUStderr, gptMetrics(16, 0.64, gptFinal), nil
	}
	o.torch = func(_ context.Context, args []string) (string, error) {
		torched = append(torched, strings.Join(args[1:], " "))
		if slices.Contains(args, "tiny") {
			return "torch 2.11.0+cu130, NVIDIA H200, steps 20, warm-up 5\nERROR torch_gpt preset=tiny batch=64 mode=compile: RuntimeError: boom\n", errors.New("exit status 1")
		}
		return torchGPT2Out, nil
	}
	var out bytes.Buffer
	err := gpuGPT(context.Background(), o, &out)
	if err == nil || !strings.Contains(err.Error(), "2 of the runs failed") {
		t.Errorf("gpuGPT: error %v, want 2 failed runs", err)
	}
	if len(trained) != 3 || !strings.Contains(trained[0], "--backend nvshmem --pes 1 --model gpt2 --batch-size 16 --dataset synthetic --precision bf16 ") {
		t.Errorf("train runs %q", trained)
	}
	if want := []string{"--preset gpt2 --batch 16,32 --modes eager,compile --steps 100 --warmup 20", "--preset tiny --batch 64 --modes eager,compile --steps 100 --warmup 20"}; !slices.Equal(torched, want) {
		t.Errorf("torch runs %q, want %q", torched, want)
	}
	got := out.String()
	for _, want := range []string{
		"symddp gpt2 124M batch 16: 512000 tokens/s, MFU 41.6% (bf16)\n",
		"torch gpt2 124M batch 32 compile: 470000 tokens/s, MFU 38.2%, peak 39.00 GiB\n",
		"GPU: NVIDIA H200 (device 0, 132 SMs)",
		"    model  batch  symddp tokens/s         MFU  torch eager tokens/s  torch.compile tokens/s  symddp/compile           target  symddp GiB  compile GiB\n",
		// 512000 · 803478528 / 989e12 = 41.6%; 512000 / 500000 = 1.02
		"gpt2 124M     16           512000  41.6% bf16                350000                  500000           1.02x  >= 1.1x not met        9.00        20.00\n",
		// 524288 / 470000 = 1.12
		"gpt2 124M     32           524288  42.6% bf16                360000                  470000           1.12x      >= 1.1x met        9.00        39.00\n",
		" gpt-tiny     64           failed           -                     -                       -               -          >= 1.1x           -            -\n",
		"RESULT gpu-gpt model=gpt2 batch=16 symddp=512000 mfu=0.416 precision=bf16 eager=350000 compile=500000\n",
		"FUSION model=gpt2 batch=16: fused bf16 GPT: 12 layers, flash attention, cuBLASLt bf16 GEMMs\n",
		"failed: gpt-tiny batch 64: train: out of GPU memory\n",
		"failed: PyTorch: ERROR torch_gpt preset=tiny batch=64 mode=compile: RuntimeError: boom\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "RESULT gpu-gpt model=tiny") {
		t.Errorf("a RESULT line for the failed run:\n%s", got)
	}
}

// TestGPUGPTFailsAtOnce: when the first train run fails (no GPU, no
// library), gpu-gpt stops with train's own line and runs nothing else;
// a missing train binary or script is refused before anything runs.
func TestGPUGPTFailsAtOnce(t *testing.T) {
	o := gpuGPTTestOpts(t)
	runs := 0
	o.train = func(context.Context, []string) (string, []byte, error) {
		runs++
		return "train: --backend nvshmem: no CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected\n", nil, errors.New("exit status 1")
	}
	o.torch = func(context.Context, []string) (string, error) { t.Error("PyTorch ran"); return "", nil }
	var out bytes.Buffer
	err := gpuGPT(context.Background(), o, &out)
	if want := "gpt2 124M batch 16: train: --backend nvshmem: no CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if runs != 1 {
		t.Errorf("%d train runs after the first failed", runs)
	}
	missing := filepath.Join(t.TempDir(), "train")
	if _, err := parseGPUGPTFlags([]string{"--train-bin", missing}); err == nil || !strings.Contains(err.Error(), "--train-bin "+missing+": no such file") {
		t.Errorf("missing train binary: %v", err)
	}
	if _, err := parseGPUGPTFlags([]string{"--torch-script", missing}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing script: %v", err)
	}
	for _, bad := range [][]string{{"--steps", "90"}, {"--precision", "fp16"}, {"--configs", "gpt2/16,gpt5/1"}, {"--torch-steps", "0"},
		{"--recompute", "all"}, {"--torch-modes", "eager,jit"}, {"--torch-modes", ""}} {
		if _, err := parseGPUGPTFlags(append([]string{"--torch-script", "none"}, bad...)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestGPUGPTTorchSteps: the PyTorch side is timed over as many steps as
// ours unless told otherwise, so that both run as long (and as hot).
func TestGPUGPTTorchSteps(t *testing.T) {
	o := gpuGPTTestOpts(t, "--warmup", "10", "--steps", "40")
	if o.torchSteps != 40 || o.torchWarmup != 10 {
		t.Errorf("defaults: PyTorch %d timed and %d warm-up steps, want 40 and 10", o.torchSteps, o.torchWarmup)
	}
	o = gpuGPTTestOpts(t, "--warmup", "10", "--steps", "40", "--torch-steps", "7", "--torch-warmup", "3")
	if o.torchSteps != 7 || o.torchWarmup != 3 {
		t.Errorf("given: PyTorch %d timed and %d warm-up steps, want 7 and 3", o.torchSteps, o.torchWarmup)
	}
}

// TestGPUGPTRecompute: --recompute reaches train and --torch-modes the
// PyTorch script (issue 40's comparison of gpt2-xl with and without
// activation checkpointing on both sides).
func TestGPUGPTRecompute(t *testing.T) {
	o := gpuGPTTestOpts(t, "--configs", "xl/16", "--recompute", "block", "--torch-modes", "compile,compile-ckpt")
	got := strings.Join(gpuGPTArgs(o, o.configs[0], "m.jsonl"), " ")
	if !strings.Contains(got, "--model gpt2-xl ") || !strings.Contains(got, "--recompute block") {
		t.Errorf("train args %q: want --model gpt2-xl and --recompute block", got)
	}
	if got := strings.Join(gpuGPTTorchArgs(o, "xl", []int{16}, false), " "); !strings.Contains(got, "--preset xl --batch 16 --modes compile,compile-ckpt") {
		t.Errorf("torch args %q", got)
	}
	o = gpuGPTTestOpts(t)
	if got := strings.Join(gpuGPTArgs(o, gptGPUConfig{preset: "gpt2", batch: 16}, "m.jsonl"), " "); strings.Contains(got, "--recompute") {
		t.Errorf("train args %q: --recompute without the flag", got)
	}
}

func TestGPUGPTArgs(t *testing.T) {
	o := gpuGPTTestOpts(t, "--lib", "/opt/libsymddp_cuda.so", "--warmup", "10", "--steps", "40", "--precision", "auto")
	got := strings.Join(gpuGPTArgs(o, gptGPUConfig{preset: "small", batch: 64}, "m.jsonl"), " ")
	for _, want := range []string{"--backend nvshmem --pes 1 --model gpt --layers 6 --heads 6 --width 384 --context 256 --batch-size 64 --dataset synthetic --precision auto ",
		"--clip-norm 0 ", "--max-steps 50 ", "--log-every 10 ", "--eval-every 0 ", "--sample-tokens 0 ", "--metrics m.jsonl", "--gpu-lib /opt/libsymddp_cuda.so"} {
		if !strings.Contains(got, want) {
			t.Errorf("train args %q lack %q", got, want)
		}
	}
}

// TestReadGPTMetrics: tokens/s is the timed window's, and MFU needs the
// final record's peak; without one (a GPU train does not know) there is
// no MFU, and a log without FLOPs per token is refused.
func TestReadGPTMetrics(t *testing.T) {
	r, err := readGPTMetrics(gptMetrics(16, 0.64, gptFinal), 20, 120, 1024)
	if err != nil || math.Abs(r.tokensPerSec-512000) > 1e-6 || r.precision != "bf16" {
		t.Fatalf("readGPTMetrics = %+v, %v", r, err)
	}
	if want := 512000 * 803478528 / 989e12; r.mfu < want*(1-1e-12) || r.mfu > want*(1+1e-12) {
		t.Errorf("mfu %v, want %v", r.mfu, want)
	}
	noPeak := `{"elapsed":9,"final":true,"flops_per_token":803478528,"precision":"fp32","samples_per_sec":400,"step":120}`
	if r, err := readGPTMetrics(gptMetrics(16, 0.64, noPeak), 20, 120, 1024); err != nil || r.mfu != 0 || r.precision != "fp32" {
		t.Errorf("no peak: %+v, %v", r, err)
	}
	old := `{"elapsed":9,"final":true,"samples_per_sec":400,"step":120}`
	if _, err := readGPTMetrics(gptMetrics(16, 0.64, old), 20, 120, 1024); err == nil || !strings.Contains(err.Error(), "no flops_per_token") {
		t.Errorf("a log without flops_per_token: %v", err)
	}
}

func TestParseTorchGPUGPT(t *testing.T) {
	res, bad := parseTorchGPUGPT(torchGPT2Out + "RESULT torch_gpt preset=gpt2 batch=8 mode=fp32\nnoise\n")
	if len(res) != 4 || len(bad) != 1 || !strings.HasPrefix(bad[0], "unreadable line: RESULT torch_gpt preset=gpt2 batch=8") {
		t.Fatalf("parseTorchGPUGPT: %d results, bad %q", len(res), bad)
	}
	if want := (torchGPUGPT{preset: "gpt2", batch: 32, mode: "compile", tokensPerSec: 470000, mfu: 0.382, peakMemGiB: 39}); res[3] != want {
		t.Errorf("result %+v, want %+v", res[3], want)
	}
}

// TestGPUGPTLlama: a Llama preset runs train's preset of that name and
// bench/torch_llama_bench.py's preset, each model family its own script
// (one run per preset), and the Llama script's RESULT and ERROR lines
// fill in its rows.
func TestGPUGPTLlama(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{torchGPTScript, torchLlamaScript} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("# stands in for the script\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o, err := parseGPUGPTFlags([]string{"--configs", "gpt2/16,llama-124m/16,llama3-1b/8", "--torch-script", "none"})
	if err != nil {
		t.Fatal(err)
	}
	o.torchOff, o.benchDir = false, dir // as the module's bench/ would give
	if got := strings.Join(gpuGPTArgs(o, o.configs[1], "m.jsonl"), " "); !strings.Contains(got, "--model llama-124m --batch-size 16 ") {
		t.Errorf("train args %q", got)
	}
	if got := strings.Join(gpuGPTTorchArgs(o, "llama3-1b", []int{8}, false), " "); got != filepath.Join(dir, torchLlamaScript)+" --preset llama3-1b --batch 8 --modes eager,compile --steps 100 --warmup 20" {
		t.Errorf("llama torch args %q", got)
	}
	if got := gpuGPTTorchArgs(o, "gpt2", []int{16}, false)[0]; got != filepath.Join(dir, torchGPTScript) {
		t.Errorf("gpt2's script %q", got)
	}
	res, bad := parseTorchGPUGPT("RESULT torch_llama model=llama preset=llama-124m layers=12 heads=12 kv_heads=4 width=768 ffn=2048 context=1024 vocab=50304 rope_theta=10000 tied=1 batch=16 mode=compile attention=gqa adamw=fused device=cuda ms_per_step=30.00 tokens_per_s=546133 mfu=0.420 n_params=123000000 flops_per_token=7.6e+08 peak_mem_gib=18.50 loss=10.9 warmup_s=40.0 steps=20\n" +
		"ERROR torch_llama model=llama preset=llama3-1b batch=8 mode=eager: OutOfMemoryError: CUDA out of memory\n")
	if want := []torchGPUGPT{{preset: "llama-124m", batch: 16, mode: "compile", tokensPerSec: 546133, mfu: 0.42, peakMemGiB: 18.5}}; !slices.Equal(res, want) {
		t.Errorf("results %+v, want %+v", res, want)
	}
	if len(bad) != 1 || !strings.HasPrefix(bad[0], "ERROR torch_llama model=llama preset=llama3-1b batch=8") {
		t.Errorf("error lines %q", bad)
	}
}

func TestTrainFailure(t *testing.T) {
	for _, tc := range []struct{ stderr, want string }{
		{"train: --precision bf16: the MLP trains in fp32\nRun 'train --help' for the flags.\n", "--precision bf16: the MLP trains in fp32"},
		{"[pe 0] something\nsegfault here\n", "segfault here"},
		{"", "fork/exec /x/train: no such file or directory"},
	} {
		if got := trainFailure(errors.New("fork/exec /x/train: no such file or directory\nmore"), tc.stderr); got != tc.want {
			t.Errorf("trainFailure(%q) = %q, want %q", tc.stderr, got, tc.want)
		}
	}
}

// TestGPUGPTTableCheckpointedPeer: with --recompute block beside
// compile-ckpt alone, the compiled column, the ratio and the memory are the
// checkpointed peer's, marked (ckpt), and the RESULT line carries it (the
// 2026-12-06 XL run printed dashes there).
func TestGPUGPTTableCheckpointedPeer(t *testing.T) {
	rows := []gptGPURow{{
		cfg:   gptGPUConfig{preset: "xl", batch: 16},
		ours:  gptRun{tokensPerSec: 44000, mfu: 0.4, precision: "bf16", deviceBytes: 34 << 30},
		torch: map[string]torchGPUGPT{"compile-ckpt": {preset: "xl", batch: 16, mode: "compile-ckpt", tokensPerSec: 40000, peakMemGiB: 25.08}},
	}}
	var out bytes.Buffer
	if err := printGPUGPTTable(&out, rows); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"40000 (ckpt)", "1.10x", ">= 1.1x met", "34.00", "25.08 (ckpt)", "compile=0 compile_ckpt=40000\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
}

// PRESET/max: symddp trains at 32, 24, 16, ... until a run does not run out
// of device memory, the script searches the same batches with --fit, and
// the row pairs each side's largest (a batch that did not fit is no
// failure on either side); --configs refuses PRESET/max beside the same
// preset at a batch.
func TestGPUGPTFit(t *testing.T) {
	o := gpuGPTTestOpts(t, "--configs", "llama3-1b/max", "--torch-modes", "compile")
	var trained []string
	o.train = func(_ context.Context, args []string) (string, []byte, error) {
		b := args[slices.Index(args, "--batch-size")+1]
		trained = append(trained, b)
		if b != "12" {
			return "train: build model llama3-1b for 32768 rows: cuda/cublas: Alloc: 4943257600 bytes: out of device memory: ...\n", nil, errors.New("exit status 1")
		}
		// 20·12 sequences of 2048 tokens in 7 s: 70217 tokens/s
		return gptGPUStderr, gptMetrics(12, 7, gptFinal), nil
	}
	var torched string
	o.torch = func(_ context.Context, args []string) (string, error) {
		torched = strings.Join(args[1:], " ")
		return "ERROR torch_llama model=llama preset=llama3-1b batch=32 mode=compile: OutOfMemoryError: CUDA out of memory (trying batch 24)\n" +
			"ERROR torch_llama model=llama preset=llama3-1b batch=24 mode=compile: OutOfMemoryError: CUDA out of memory (trying batch 16)\n" +
			"RESULT torch_llama model=llama preset=llama3-1b batch=16 mode=compile ms_per_step=470 tokens_per_s=69720 mfu=0.551 peak_mem_gib=65.81\n", nil
	}
	var out bytes.Buffer
	if err := gpuGPT(context.Background(), o, &out); err != nil {
		t.Fatalf("gpuGPT: %v\n%s", err, out.String())
	}
	if want := []string{"32", "24", "16", "12"}; !slices.Equal(trained, want) {
		t.Errorf("train batches %q, want %q", trained, want)
	}
	if want := "--preset llama3-1b --batch 32,24,16,12,8,4,2,1 --modes compile --steps 100 --warmup 20 --fit"; torched != want {
		t.Errorf("torch args %q, want %q", torched, want)
	}
	got := out.String()
	for _, want := range []string{
		"symddp llama3-1b batch 16: out of device memory (trying batch 12)\n",
		"symddp llama3-1b batch 12: 70217 tokens/s",
		// 70217 / 69720 = 1.007
		"llama3-1b  12/16            70217",
		"1.01x",
		"RESULT gpu-gpt model=llama3-1b batch=12 symddp=70217 ",
		" fit=1 compile_batch=16\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	for _, bad := range [][]string{{"llama3-1b/max", "llama3-1b/8"}, {"llama3-1b/8", "llama3-1b/max"}, {"llama-124m/max", "llama-124m/max"}} {
		if _, err := parseGPUGPTFlags([]string{"--configs", strings.Join(bad, ","), "--torch-script", "none"}); err == nil {
			t.Errorf("--configs %s accepted", strings.Join(bad, ","))
		}
	}
}
