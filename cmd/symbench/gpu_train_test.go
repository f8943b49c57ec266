package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseTrainConfig(t *testing.T) {
	c, err := parseTrainConfig("1024x4/512")
	if err != nil || c.batch != 512 || len(c.hidden) != 4 || c.hidden[3] != 1024 || c.name() != "784-1024-1024-1024-1024-10" {
		t.Fatalf("parseTrainConfig = %+v, %v", c, err)
	}
	// 784-256-256-10 at batch 1: forward 2·268800, weight gradients the
	// same, input gradients without the first layer's 200704.
	if f := (trainConfig{hidden: []int{256, 256}, batch: 1}).flops(); f != 2*(3*268800-200704) {
		t.Errorf("flops = %v", f)
	}
	for _, bad := range []string{"256/64", "0x2/64", "256x2/0", "big"} {
		if _, err := parseTrainConfig(bad); err == nil {
			t.Errorf("parseTrainConfig(%q) succeeded", bad)
		}
	}
}

// gpuStderr is what train --backend nvshmem --pes 1 prints on stderr before
// training, in the format of its log lines (cmd/train's line handler: no
// time or level) with the CUDA engine's and the model's notices.
const gpuStderr = `msg="compute engine" engine=cuda gpu="NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB), driver 13.0"
msg="model mlp: fc1 fused: cublasLt bias+relu fwd (with mask), drelu+bgrad bwd in the next layer's dx GEMM, cublasLt dW GEMM; fc2 fused: cublasLt bias fwd, bgrad in the dW GEMM, dx GEMM with fc1's drelu+bgrad"
training mlp: 203530 parameters, 1 PEs (nvshmem, cuda), global batch 256 (256 per PE per micro-batch), 600 steps
`

// gpuMetrics is a metrics log of 200 warm-up steps and 400 timed ones at
// batch 256: 102400 samples in 0.2 s (eager) or 0.1 s (graph).
func gpuMetrics(graph bool) []byte {
	d := 0.2
	if graph {
		d = 0.1
	}
	return []byte(fmt.Sprintf(`{"accuracy":0.1,"elapsed":0.5,"epoch":0,"loss":2.30,"lr":0.01,"samples_per_sec":100000,"step":200}
{"accuracy":0.2,"elapsed":%g,"epoch":0,"loss":2.10,"lr":0.01,"samples_per_sec":%g,"step":400}
{"accuracy":0.3,"elapsed":%g,"epoch":0,"loss":1.95,"lr":0.01,"samples_per_sec":%g,"step":600}
{"elapsed":%g,"final":true,"replicas_identical":true,"samples_per_sec":90000,"step":600,"test_accuracy":0.3,"test_loss":1.9}
`, 0.5+d/2, 51200/(d/2), 0.5+d, 51200/(d/2), 0.5+d))
}

// TestGPUTrainFromRuns: the table, RESULT and FUSION lines come from train's
// metrics logs and stderr, one run per mode with --cuda-graph set to match.
func TestGPUTrainFromRuns(t *testing.T) {
	o, err := parseGPUTrainFlags([]string{"--configs", "256x2/256", "--warmup", "200", "--steps", "400"})
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	o.train = func(_ context.Context, args []string) (string, []byte, error) {
		ran = append(ran, strings.Join(args, " "))
		return gpuStderr, gpuMetrics(slices.Contains(args, "--cuda-graph=true")), nil
	}
	var out bytes.Buffer
	if err := gpuTrain(context.Background(), o, &out); err != nil {
		t.Fatalf("gpuTrain: %v\n%s", err, out.String())
	}
	if len(ran) != 2 || !strings.Contains(ran[0], "--cuda-graph=false") || !strings.Contains(ran[1], "--cuda-graph=true") {
		t.Errorf("train runs %q", ran)
	}
	for _, want := range []string{
		"GPU: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB), driver 13.0\n",
		// 102400 samples in 0.2 s and 0.1 s; a graph step of 0.1 s / 400.
		"784-256-256-10    256           512000          1024000    250.0 us           1.2  1.9500\n", // 2·256·(3·268800−200704) flops in 250 µs
		"RESULT symddp model=784-256-256-10 batch=256 eager=512000 graph=1024000\n",
		"FUSION model=784-256-256-10 batch=256: fc1 fused: cublasLt bias+relu fwd (with mask), drelu+bgrad bwd in the next layer's dx GEMM, cublasLt dW GEMM; fc2 fused: cublasLt bias fwd, bgrad in the dW GEMM, dx GEMM with fc1's drelu+bgrad\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	// A failed run is reported with its configuration and mode.
	o.train = func(context.Context, []string) (string, []byte, error) { return "", nil, errors.New("no GPU") }
	out.Reset()
	if err := gpuTrain(context.Background(), o, &out); err == nil || !strings.Contains(err.Error(), "784-256-256-10 batch 256: eager: no GPU") {
		t.Errorf("failed run: error %v", err)
	}
}

func TestGPUTrainArgs(t *testing.T) {
	o, err := parseGPUTrainFlags([]string{"--lib", "/opt/libsymddp_cuda.so"})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := parseTrainConfig("1024x4/1024")
	got := strings.Join(gpuTrainArgs(o, c, "eager", "m.jsonl"), " ")
	for _, want := range []string{"--backend nvshmem --pes 1 --model mlp --hidden 1024,1024,1024,1024 --batch-size 1024 ",
		"--max-steps 2200 ", "--log-every 200 ", "--metrics m.jsonl", "--cuda-graph=false", "--gpu-lib /opt/libsymddp_cuda.so", "--momentum 0.9 "} {
		if !strings.Contains(got, want) {
			t.Errorf("train args %q lack %q", got, want)
		}
	}
	if _, err := parseGPUTrainFlags([]string{"--steps", "250", "--warmup", "200"}); err == nil {
		t.Error("--steps not a multiple of --warmup accepted")
	}
}

// TestTrainNotices: the GPU and the fusion notice with the launcher's
// prefix (several PEs) and without it; nothing from a CPU run.
func TestTrainNotices(t *testing.T) {
	prefixed := "[pe 0] " + strings.ReplaceAll(strings.TrimSpace(gpuStderr), "\n", "\n[pe 0] ") + "\n"
	for name, stderr := range map[string]string{"one PE": gpuStderr, "prefixed": prefixed} {
		gpu, fusion := trainNotices(stderr)
		if gpu != "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB), driver 13.0" || !strings.HasPrefix(fusion, "fc1 fused: cublasLt bias+relu fwd") || !strings.HasSuffix(fusion, "dx GEMM with fc1's drelu+bgrad") {
			t.Errorf("%s: gpu %q, fusion %q", name, gpu, fusion)
		}
	}
	cpu := `[pe 0] msg="compute engine" engine=cpu/openblas blas="OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64 (libopenblas.so.0), 1 thread" loops=c/avx2` + "\n"
	if gpu, fusion := trainNotices(cpu); gpu != "" || fusion != "" {
		t.Errorf("CPU run: gpu %q, fusion %q", gpu, fusion)
	}
	if loss, err := lastLoss(gpuMetrics(false), 600); err != nil || loss != 1.95 {
		t.Errorf("lastLoss = %v, %v", loss, err)
	}
}

// symbench finds libsymddp_cuda.so in ./build of the directory it runs in
// and gives train its absolute path: train runs in a directory of its own,
// where it looked in vain (./build there), unless SYMDDP_CUDA_LIB was set.
func TestCUDALibFound(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "build", "libsymddp_cuda.so")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SYMDDP_CUDA_LIB", "")
	t.Chdir(dir)
	if got := cudaLibFor(""); got != lib {
		t.Errorf("found %q, want %q", got, lib)
	}
	if got := cudaLibFor("/x/lib.so"); got != "/x/lib.so" {
		t.Errorf("--lib /x/lib.so gave %q", got)
	}
	o, err := parseGPUTrainFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(gpuTrainArgs(o, o.configs[0], "graph", "m.jsonl"), " "); !strings.Contains(args, "--gpu-lib "+lib) {
		t.Errorf("train's arguments lack --gpu-lib %s: %s", lib, args)
	}
}
