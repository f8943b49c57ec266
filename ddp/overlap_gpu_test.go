package ddp

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch/launchtest"
	_ "github.com/symddp/symddp/comm/nvshmem"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/internal/cudalib"
	"github.com/symddp/symddp/internal/settings"
	"github.com/symddp/symddp/models"
)

// TestGPUOverlapSameBits trains the mlp on the real GPU's device step path
// with several PEs (SYMDDP_GPU_PES, default 2; 8 under MPS in
// scripts/gpu-overlap-check.sh), replicated and sharded, with CUDA graphs,
// and with gradient buckets of -1 (one reduction after backward), 1 MiB (one
// bucket on the collectives stream) and 1 KiB (a bucket per layer, reduced
// beside backward): every run ends on the same bits on every PE. The
// engines keep cuBLASLt's heuristic choices (SYMDDP_CUDA_TUNE=0), so that
// runs with separate engines compare bit for bit. A hang ends at the job's
// deadline with the PEs that had not arrived.
func TestGPUOverlapSameBits(t *testing.T) {
	lib, err := cudalib.Load("")
	if err != nil {
		t.Skip("no GPU library: " + err.Error())
	}
	if _, err := lib.DeviceCount(); err != nil {
		t.Skip("no GPU: " + err.Error())
	}
	pes := []int{2}
	if v := settings.Get(settings.GPUPEs); v != "" {
		pes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want PE counts such as 2,8", settings.GPUPEs, v)
			}
			if n > 1 {
				pes = append(pes, n)
			}
		}
	}
	env := []string{cudalib.EnvLib + "=" + lib.Path(), "NVSHMEM_DISABLE_NVLS=1", "SYMDDP_CUDA_TUNE=0"}
	for _, n := range pes {
		t.Run(fmt.Sprintf("NPEs=%d", n), func(t *testing.T) {
			job := launchtest.Job{NPEs: n, Backend: "nvshmem", Timeout: 2 * time.Minute, HeapSize: 256 << 20, Env: env}
			launchtest.Run(t, job, func(t *testing.T, c comm.Comm) { overlapRunsGPU(t, c) })
		})
	}
}

// overlapRunsGPU is one PE's part of TestGPUOverlapSameBits.
func overlapRunsGPU(t *testing.T, c comm.Comm) {
	train, test, err := datasets.SyntheticSplit(2048, 256, 64, 10, 7)
	if err != nil {
		t.Fatal(err)
	}
	var ref []float32
	for _, sharded := range []bool{false, true} {
		for _, bucket := range []int{-1, 1 << 20, 1 << 10} {
			name := fmt.Sprintf("PE %d, sharded %v, bucket %d", c.MyPE(), sharded, bucket)
			e, err := cuda.OnComm(c, cuda.Options{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := models.New("mlp", models.Config{Input: []int{64}, Hidden: []int{128, 128}, Classes: 10})
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{GlobalBatch: 64 * c.NPEs(), Epochs: 1, MaxSteps: 20, LR: 3e-3, Seed: 5, LogEvery: 10,
				CheckReplicasEvery: 10, BucketBytes: bucket, ReplicatedUpdate: !sharded}
			tr, err := New(c, e, m, adamw(t, 0.1), opts)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			res, err := tr.Fit(context.Background(), train, test)
			params := tr.Params()
			cerr := tr.Close()
			if err != nil || cerr != nil {
				t.Fatalf("%s: fit: %v, close: %v", name, err, cerr)
			}
			if !res.Replicas.Identical {
				t.Fatalf("%s: %s", name, res.Replicas.String())
			}
			if ref == nil {
				ref = params
				continue
			}
			for i, p := range params {
				if math.Float32bits(p) != math.Float32bits(ref[i]) {
					t.Fatalf("%s: parameter %d is %v, %v replicated with one reduction after backward", name, i, p, ref[i])
				}
			}
			t.Logf("%s: %d steps, test loss %.5f, the bits of the first run", name, res.Steps, res.Test.Loss)
		}
	}
}
