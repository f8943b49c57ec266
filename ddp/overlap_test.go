package ddp

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/compute/cuda"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/internal/settings"
	"github.com/symddp/symddp/internal/syncbuf"
	"github.com/symddp/symddp/models"
)

// overlapRun is worldFit on a fresh world of npes PEs whose engines run
// with or without graphs and log into the returned buffer; it also returns
// how many times each PE forked its collectives stream.
func overlapRun(t *testing.T, npes int, graphs bool, opts Options) ([]worldResult, []int, string) {
	t.Helper()
	var logs syncbuf.Buffer
	w := newWorldOf(npes, cuda.Options{DisableGraphs: !graphs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	out := worldFitIn(t, w, opts)
	for pe, f := range w.forked {
		require.False(t, f, "PE %d ended with its collectives stream forked", pe)
	}
	return out, w.forks, logs.String()
}

// TestDeviceOverlapSameBits: on the device step path of 2 PEs, reducing the
// gradients bucket by bucket on the collectives stream while backward runs
// (a bucket per layer: 64 bytes; one bucket of the whole arena after
// backward: 1 MiB) ends on the bits of the one reduction after backward
// (bucket size -1; and 0, the default where PEs share a GPU, as the
// emulated world's do), replicated and sharded, eagerly and replayed from
// CUDA graphs (the collectives recorded in them), with one and with two
// micro-batches a step, and with the gradients reduced in bf16.
func TestDeviceOverlapSameBits(t *testing.T) {
	const npes = 2
	type variant struct {
		sharded bool
		acc     int
		bf16    bool
	}
	variants := []variant{{false, 1, false}, {true, 1, false}, {false, 2, false}, {true, 2, false}, {false, 1, true}, {true, 1, true}}
	if testing.Short() {
		variants = variants[:2]
	}
	for _, v := range variants {
		opts := zeroOptions()
		opts.ReplicatedUpdate, opts.Accumulate = !v.sharded, v.acc
		if v.bf16 {
			opts.GradDType = comm.BFloat16
		}
		strategy := map[bool]string{false: "device", true: "device-sharded"}[v.sharded]
		var ref []float32
		var tinyForks, wholeForks int
		for _, graphs := range []bool{false, true} {
			for _, bucket := range []int{-1, 0, 1 << 20, 64} {
				name := fmt.Sprintf("%+v, graphs %v, bucket %d", v, graphs, bucket)
				o := opts
				o.BucketBytes = bucket
				res, forks, logs := overlapRun(t, npes, graphs, o)
				require.NotContains(t, logs, "capture of the training step failed", name)
				require.NotContains(t, logs, "gradient buckets off", name)
				for pe, r := range res {
					require.Equal(t, strategy, r.strategy, name)
					require.True(t, r.res.Replicas.Identical, "%s: %s", name, r.res.Replicas.String())
					require.Equal(t, 12, r.res.Steps, name)
					if bucket <= 0 {
						require.Zero(t, forks[pe], "%s: the collectives stream forked without buckets", name)
					} else {
						require.Positive(t, forks[pe], "%s: the buckets did not go through the collectives stream", name)
					}
				}
				switch bucket {
				case 1 << 20:
					wholeForks = forks[0]
				case 64:
					tinyForks = forks[0]
				}
				if ref == nil {
					ref = res[0].params
					continue
				}
				for i, p := range res[0].params {
					if math.Float32bits(p) != math.Float32bits(ref[i]) {
						t.Fatalf("%s: parameter %d is %v, %v with one reduction after backward, eagerly", name, i, p, ref[i])
					}
				}
			}
			require.Greater(t, tinyForks, wholeForks, "%+v, graphs %v: a bucket per layer forks more often than one bucket", v, graphs)
		}
	}
}

// TestDeviceOverlapDefault: BucketBytes left 0 on the device step path
// reduces once after backward where the PEs share a GPU (the emulated
// world's default) and in DefaultDeviceBucketBytes buckets on the
// collectives stream where each PE has a GPU of its own, on the same bits,
// replicated and sharded; StartInfo.Reduction says which.
func TestDeviceOverlapDefault(t *testing.T) {
	const npes = 2
	for _, sharded := range []bool{false, true} {
		opts := zeroOptions()
		opts.ReplicatedUpdate = !sharded
		what := map[bool]string{false: "allreduce", true: "reduce-scatter"}[sharded]
		var params [2][]float32
		for i, own := range []bool{false, true} {
			var logs syncbuf.Buffer
			w := newWorldOf(npes, cuda.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			w.ownGPU = own
			name := fmt.Sprintf("sharded %v, a GPU a PE %v", sharded, own)
			want := "one " + what + " after backward (PEs share a GPU, whose SMs bucket reductions would take from backward)"
			if own {
				want = what + " of 25 MiB buckets on the collectives stream during backward"
			}
			o := opts
			o.Hooks.OnStart = func(s StartInfo) {
				if s.Reduction != want {
					t.Errorf("%s: PE %d: Reduction %q, want %q", name, s.PE, s.Reduction, want)
				}
			}
			res := worldFitIn(t, w, o)
			require.NotContains(t, logs.String(), "gradient buckets off", name)
			for pe, r := range res {
				require.True(t, r.res.Replicas.Identical, "%s: %s", name, r.res.Replicas.String())
				if own {
					require.Positive(t, w.forks[pe], "%s: PE %d's buckets did not go through the collectives stream", name, pe)
				} else {
					require.Zero(t, w.forks[pe], "%s: PE %d forked its collectives stream", name, pe)
				}
			}
			params[i] = res[0].params
		}
		for j, p := range params[1] {
			if math.Float32bits(p) != math.Float32bits(params[0][j]) {
				t.Fatalf("sharded %v: parameter %d is %v with the default buckets, %v with one reduction after backward", sharded, j, p, params[0][j])
			}
		}
	}
}

// TestSharedGPUClusters: a bucket size asked for on PEs that share a GPU
// tells the engine so before Build (compute/cuda's then limits its bf16
// GEMMs to one-block clusters, with which the overlapped reduction ran under
// MPS where larger clusters hung), and the reduction's line says it; not
// where each PE has a GPU, not with the default (no buckets on a shared
// GPU), and not with SYMDDP_CUDA_LT_NOCLUSTER=0.
func TestSharedGPUClusters(t *testing.T) {
	const npes = 2
	for _, tc := range []struct {
		own     bool
		bucket  int
		env     string
		limited bool
		want    string
	}{
		{false, 1 << 20, "", true, "allreduce of 1 MiB buckets on the collectives stream during backward (PEs share a GPU: bf16 GEMMs of one-block clusters)"},
		{false, 1 << 20, "0", false, "allreduce of 1 MiB buckets on the collectives stream during backward"},
		{true, 1 << 20, "", false, "allreduce of 1 MiB buckets on the collectives stream during backward"},
		{false, 0, "", false, "one allreduce after backward (PEs share a GPU, whose SMs bucket reductions would take from backward)"},
	} {
		name := fmt.Sprintf("a GPU a PE %v, bucket %d, SYMDDP_CUDA_LT_NOCLUSTER=%q", tc.own, tc.bucket, tc.env)
		t.Run(name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(settings.CUDANoCluster, tc.env)
			}
			w := newWorldOf(npes, cuda.Options{})
			w.ownGPU = tc.own
			o := zeroOptions()
			o.ReplicatedUpdate, o.BucketBytes = true, tc.bucket
			o.Hooks.OnStart = func(s StartInfo) {
				if s.Reduction != tc.want {
					t.Errorf("PE %d: Reduction %q, want %q", s.PE, s.Reduction, tc.want)
				}
			}
			res := worldFitIn(t, w, o)
			for pe, r := range res {
				require.True(t, r.res.Replicas.Identical, r.res.Replicas.String())
				require.Equal(t, tc.limited, w.devs[pe].ClustersLimited(), "PE %d: clusters limited", pe)
			}
		})
	}
}

// TestDeviceOverlapTrace: with SYMDDP_OVERLAP_TRACE the engine's log tells,
// after the step asked for, how the bucket reductions fell against
// backward: with a bucket per layer, all three of the mlp's began and ended
// before backward ended (the emulated device runs everything in order: a
// GPU overlaps them, the trace measures by how much); with one bucket of the
// whole arena, its reduction comes after backward.
func TestDeviceOverlapTrace(t *testing.T) {
	t.Setenv(OverlapTraceEnv, "3")
	for _, tc := range []struct {
		bucket int
		want   string
	}{
		{64, "over 3 layers; 3 bucket reductions, 3 began and 3 ended before backward ended"},
		{1 << 20, "over 3 layers; 1 bucket reductions, 0 began and 0 ended before backward ended"},
	} {
		for _, graphs := range []bool{false, true} {
			opts := zeroOptions()
			opts.BucketBytes = tc.bucket
			_, _, logs := overlapRun(t, 2, graphs, opts)
			lines := strings.Count(logs, "overlap trace of step 3: ")
			require.Equal(t, 2, lines, "one report per PE, graphs %v:\n%s", graphs, logs)
			require.Contains(t, logs, tc.want, "graphs %v", graphs)
		}
	}
	t.Setenv(OverlapTraceEnv, "zero")
	train, err := datasets.Synthetic(64, 20, 4, 7)
	require.NoError(t, err)
	w := newWorld(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for pe := range 2 {
		wg.Go(func() {
			m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16}, Classes: 4})
			if err != nil {
				errs[pe] = err
				return
			}
			tr, err := New(w.comm(pe), w.engs[pe], m, adamw(t, 0), Options{GlobalBatch: 8, MaxSteps: 1, LR: 0.01, BucketBytes: 64})
			if err != nil {
				errs[pe] = err
				return
			}
			defer tr.Close()
			_, errs[pe] = tr.Fit(context.Background(), train, nil)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.ErrorContains(t, err, `SYMDDP_OVERLAP_TRACE="zero": want the number of the step to trace`)
	}
}

// TestDescribeTrace: the trace's words from marks and their stamps.
func TestDescribeTrace(t *testing.T) {
	marks := []traceMark{{kind: 's'}, {kind: 'l'}, {kind: 'b', bucket: 0}, {kind: 'l'}, {kind: 'e', bucket: 0},
		{kind: 'l'}, {kind: 'E'}, {kind: 'b', bucket: 1}, {kind: 'e', bucket: 1}}
	stamps := []uint64{1000, 2000, 2500, 3000, 4000, 5000, 6000, 6500, 9000}
	require.Equal(t, "backward 5.0 us over 3 layers; 2 bucket reductions, 1 began and 1 ended before backward ended "+
		"(us from backward's start: 0: 1.5 to 3.0, 1: 5.5 to 8.0)", describeTrace(marks, stamps))
}

// TestDeviceOverlapStop: a stop that one PE asks for (its context
// cancelled after step 4) reaches every PE through the control words, which
// ride along with a gradient bucket (replicated) or are reduced apart on the
// collectives stream (sharded), so all stop after the same step (the next
// one: the device path reads reports a step late) and hold the same bits.
func TestDeviceOverlapStop(t *testing.T) {
	train, test, err := datasets.SyntheticSplit(600, 100, 20, 4, 7)
	require.NoError(t, err)
	for _, sharded := range []bool{false, true} {
		w := newWorld(2)
		res := make([]worldResult, 2)
		var wg sync.WaitGroup
		for pe := range 2 {
			wg.Go(func() {
				r := &res[pe]
				m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16, 16}, Classes: 4})
				if err != nil {
					r.err = err
					return
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				opts := zeroOptions()
				opts.BucketBytes, opts.ReplicatedUpdate = 64, !sharded
				opts.Hooks.OnStep = func(si StepInfo) {
					if pe == 1 && si.Step == 4 {
						cancel()
					}
				}
				tr, err := New(w.comm(pe), w.engs[pe], m, adamw(t, 0.1), opts)
				if err != nil {
					r.err = err
					return
				}
				defer tr.Close()
				r.res, r.err = tr.Fit(ctx, train, test)
				r.params = tr.Params()
			})
		}
		wg.Wait()
		for pe, r := range res {
			require.NoError(t, r.err, "sharded %v, PE %d", sharded, pe)
			require.Equal(t, 6, r.res.Steps, "sharded %v, PE %d", sharded, pe)
		}
		require.Positive(t, w.forks[0])
		for i, v := range res[0].params {
			require.Equal(t, math.Float32bits(v), math.Float32bits(res[1].params[i]), "sharded %v: parameter %d", sharded, i)
		}
	}
}

// TestDeviceOverlapSameCalls: with gradient buckets on the device path,
// every PE of the bf16 GPT (2 layers, tied embedding, 4 PEs, CUDA graphs)
// forks, joins and calls the same collectives in the same order with the
// same arguments, replicated and sharded. On a GPU each collective's
// kernel meets the kernels of the same position on the other PEs
// (cuda/sd_collectives.cu), so PEs that differed here would hang there;
// scripts/gpu-overlap-check.sh's gpt-tiny runs hung on an H200 on
// 2026-12-06, and this rules out that cause.
func TestDeviceOverlapSameCalls(t *testing.T) {
	const npes = 4
	for _, sharded := range []bool{false, true} {
		w := newWorldOf(npes, cuda.Options{})
		var wg sync.WaitGroup
		errs := make([]error, npes)
		for pe := range npes {
			wg.Go(func() {
				train, val, m, o := lmSetup(t, "gpt", bf16Text(), models.Config{Layers: 2, Heads: 2, Width: 64, Context: 64})
				var losses []float64
				opts := bf16Options(4, 1, &losses)
				opts.BucketBytes, opts.ReplicatedUpdate = 16<<10, !sharded
				tr, err := New(w.comm(pe), w.engs[pe], m, o, opts)
				if err != nil {
					errs[pe] = err
					return
				}
				defer tr.Close()
				_, errs[pe] = tr.Fit(context.Background(), train, val)
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			// PEs that called different collectives wait for each other
			// in the world's barrier forever: say where they parted.
			w.mu.Lock()
			defer w.mu.Unlock()
			for pe := 1; pe < npes; pe++ {
				require.Equal(t, w.calls[0], w.calls[pe], "sharded %v: stuck after 2 minutes; PE %d's calls against PE 0's", sharded, pe)
			}
			t.Fatalf("sharded %v: stuck after 2 minutes with the same calls on every PE", sharded)
		}
		for pe := range npes {
			require.NoError(t, errs[pe], "PE %d", pe)
		}
		require.Greater(t, w.forks[0], 4, "sharded %v: the buckets went through the collectives stream", sharded)
		for pe := 1; pe < npes; pe++ {
			require.Equal(t, w.calls[0], w.calls[pe], "sharded %v: PE %d's calls against PE 0's", sharded, pe)
		}
		t.Logf("sharded %v: %d calls a PE, %d forks", sharded, len(w.calls[0]), w.forks[0])
	}
}
