package ddp_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch/launchtest"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
)

// BenchmarkGPTStepCPU times optimizer steps of gpt-tiny's shape (4 layers,
// width 128, context 128: 0.8M parameters, 3.2 MB of gradients) on the CPU
// at 2 PEs over shm, 8 sequences per PE and step, AdamW, one BLAS thread per
// PE; ns/op is one step, after 3 untimed ones. The update modes:
//
//   - sharded: the default, ZeRO-1 with 1 MiB buckets, each bucket's
//     reduce-scatter started while backward runs;
//   - sharded-256KiB: the same with smaller buckets, more of them;
//   - sharded-no-buckets: one reduce-scatter of the whole arena at the end
//     of backward (BucketBytes -1), nothing overlapped;
//   - replicated: allreduce in 1 MiB buckets, every PE updates everything.
//
// symbench gpt-cpu measures the train command end to end; this is the
// step alone, for comparing the modes (go test -run '^$' -bench GPTStepCPU).
func BenchmarkGPTStepCPU(b *testing.B) {
	for _, v := range []struct {
		name       string
		bucket     int
		replicated bool
	}{
		{"sharded", 0, false},
		{"sharded-256KiB", 256 << 10, false},
		{"sharded-no-buckets", -1, false},
		{"replicated", 0, true},
	} {
		b.Run(v.name, func(b *testing.B) {
			launchtest.Bench(b, launchtest.Job{NPEs: 2}, func(b *testing.B, c comm.Comm) {
				benchGPTSteps(b, c, v.bucket, v.replicated)
			})
		})
	}
}

// benchGPTSteps runs 3 + b.N steps of the benchmark's GPT in this PE, the
// timer on for the last b.N.
func benchGPTSteps(b *testing.B, c comm.Comm, bucket int, replicated bool) {
	const warm, perPE, seqLen = 3, 8, 128
	e, err := cpu.New(cpu.Options{Threads: 1})
	require.NoError(b, err)
	cfg := models.Config{Layers: 4, Heads: 4, Width: 128, Context: seqLen}
	train, _, m, o := ddp.GPTSetup(b, ddp.CodeText(512<<10, "f", "x", "*"), cfg)
	opts := ddp.Options{GlobalBatch: perPE * c.NPEs(), Epochs: 1 << 20, MaxSteps: warm + b.N, Seed: 1, LR: 1e-3,
		BucketBytes: bucket, ReplicatedUpdate: replicated, LogEvery: 1 << 30}
	var start, end time.Time
	opts.Hooks.OnStep = func(s ddp.StepInfo) {
		switch s.Step {
		case warm:
			b.ResetTimer()
			start = time.Now()
		case warm + b.N:
			b.StopTimer() // not Fit's ending (the replica check)
			end = time.Now()
		}
	}
	tr, err := ddp.New(c, e, m, o, opts)
	require.NoError(b, err)
	if want := map[bool]string{false: "sharded", true: "replicated"}[replicated]; tr.Strategy() != want {
		b.Fatalf("strategy %s, want %s", tr.Strategy(), want)
	}
	res, err := tr.Fit(context.Background(), train, nil)
	require.NoError(b, err)
	require.True(b, res.Replicas.Identical, "replicas identical")
	require.NoError(b, tr.Close())
	b.ReportMetric(float64(perPE*c.NPEs()*seqLen*b.N)/end.Sub(start).Seconds(), "tokens/s")
}
