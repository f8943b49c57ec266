package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/compute/cuda/cudatest"
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

// The benchmark's steps (eager, then captured and replayed) run on the
// emulated device, and the table and RESULT lines come out.
func TestGPUTrainEmulated(t *testing.T) {
	o, err := parseGPUTrainFlags([]string{"--configs", "16x1/8", "--time", "20ms", "--warmup", "3"})
	if err != nil {
		t.Fatal(err)
	}
	o.engine = func() (*cuda.Engine, error) { return cudatest.NewEmulated(cuda.Options{}), nil }
	var out bytes.Buffer
	if err := gpuTrain(o, &out); err != nil {
		t.Fatalf("gpuTrain: %v\n%s", err, out.String())
	}
	m := regexp.MustCompile(`RESULT symddp model=784-16-10 batch=8 eager=([0-9]+) graph=([0-9]+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no RESULT line in\n%s", out.String())
	}
	if !regexp.MustCompile(`FUSION model=784-16-10 batch=8: fc1 fused: cublasLt bias\+relu fwd \(with mask\), drelu\+bgrad bwd in the next layer's dx GEMM, cublasLt dW GEMM; fc2 fused: cublasLt bias fwd, bgrad in the dW GEMM, dx GEMM with fc1's drelu\+bgrad\n`).MatchString(out.String()) {
		t.Errorf("no FUSION line naming the fused layers in\n%s", out.String())
	}
	for _, v := range m[1:] {
		if n, _ := strconv.Atoi(v); n <= 0 {
			t.Errorf("rate %s in\n%s", v, out.String())
		}
	}
}
