package ddp

import (
	"context"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// worldResult is one PE's outcome of a worldFit.
type worldResult struct {
	res      Result
	err      error
	params   []float32
	strategy string
	state    []int // lengths of the engine's optimizer state tensors
}

// worldFit trains the mlp on synthetic data on an emulated job of npes PEs
// (world: each PE its own emulated CUDA engine) with AdamW and opts.
func worldFit(t *testing.T, npes int, opts Options) []worldResult {
	t.Helper()
	return worldFitIn(t, newWorld(npes), opts)
}

// worldFitIn is worldFit on the PEs of w.
func worldFitIn(t *testing.T, w *world, opts Options) []worldResult {
	t.Helper()
	return worldRun(t, w, opts, func(tr *Trainer, train, test datasets.Source) (Result, error) {
		return tr.Fit(context.Background(), train, test)
	})
}

// worldRun is worldFitIn with body in place of Fit.
func worldRun(t *testing.T, w *world, opts Options, body func(tr *Trainer, train, test datasets.Source) (Result, error)) []worldResult {
	t.Helper()
	npes := w.npes
	train, test, err := datasets.SyntheticSplit(600, 100, 20, 4, 7)
	require.NoError(t, err)
	out := make([]worldResult, npes)
	var wg sync.WaitGroup
	for pe := range npes {
		wg.Go(func() {
			r := &out[pe]
			m, err := models.New("mlp", models.Config{Input: []int{20}, Hidden: []int{16, 16}, Classes: 4})
			if err != nil {
				r.err = err
				return
			}
			o, err := optim.NewAdamW(optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1})
			if err != nil {
				r.err = err
				return
			}
			tr, err := New(w.comm(pe), w.engs[pe], m, o, opts)
			if err != nil {
				r.err = err
				return
			}
			defer tr.Close()
			r.strategy = tr.Strategy()
			r.res, r.err = body(tr, train, test)
			r.params = tr.Params()
			for _, s := range w.engs[pe].OptimizerState() {
				r.state = append(r.state, s.Size())
			}
		})
	}
	wg.Wait()
	for pe, r := range out {
		require.NoError(t, r.err, "PE %d", pe)
	}
	return out
}

func zeroOptions() Options {
	return Options{GlobalBatch: 48, Epochs: 1, MaxSteps: 12, LR: 3e-3, Seed: 5, LogEvery: 4}
}

// TestDeviceShardedUpdate: on the device step path with 3 PEs the update
// is sharded (each PE keeps the AdamW state of its shard only) and, without
// clipping, ends on the bits of the replicated device update (with two
// micro-batches a step too); with clipping, within float32 noise of it (the
// norm is summed shard by shard).
func TestDeviceShardedUpdate(t *testing.T) {
	const npes = 3
	for _, tc := range []struct {
		clip float32
		acc  int
	}{{0, 1}, {1e-3, 1}, {0, 2}} {
		clip := tc.clip
		opts := zeroOptions()
		opts.ClipNorm, opts.Accumulate = clip, tc.acc
		sharded := worldFit(t, npes, opts)
		opts.ReplicatedUpdate = true
		replicated := worldFit(t, npes, opts)
		n := len(sharded[0].params)
		for pe := range npes {
			s, r := sharded[pe], replicated[pe]
			require.Equal(t, "device-sharded", s.strategy)
			require.Equal(t, "device", r.strategy)
			lo, hi := comm.Shard(0, n, npes, pe)
			require.Equal(t, []int{hi - lo, hi - lo}, s.state, "PE %d: AdamW state of its shard only", pe)
			require.Equal(t, []int{n, n}, r.state)
			require.True(t, s.res.Replicas.Identical, s.res.Replicas.String())
			require.Len(t, s.res.DeviceBytes, npes)
			require.Equal(t, 12, s.res.Steps)
		}
		worst := 0.0
		for i, v := range sharded[0].params {
			d := math.Abs(float64(v - replicated[0].params[i]))
			worst = max(worst, d)
			if clip == 0 && math.Float32bits(v) != math.Float32bits(replicated[0].params[i]) {
				t.Fatalf("no clipping: parameter %d is %v sharded, %v replicated", i, v, replicated[0].params[i])
			}
		}
		t.Logf("clip %g, %d micro-batches: largest parameter difference sharded - replicated %.3g", clip, tc.acc, worst)
		require.Less(t, worst, 1e-5)
		require.InDelta(t, replicated[0].res.Test.Loss, sharded[0].res.Test.Loss, 1e-4)
	}
}

// TestDeviceResumeIsExact: a device run checkpointed at step 6 and
// resumed ends on the bits of the run never interrupted, on one PE (the
// engine's AdamW state allocated for the resume) and sharded on 3 (the
// state gathered from the PEs' shards for the checkpoint, each PE taking
// its shard back on resume).
func TestDeviceResumeIsExact(t *testing.T) {
	for _, npes := range []int{1, 3} {
		dir := filepath.Join(t.TempDir(), "ck")
		opts := zeroOptions()
		opts.ClipNorm = 1e-3
		whole := worldFit(t, npes, opts)
		first := opts
		first.MaxSteps, first.Checkpoint = 6, CheckpointOptions{Dir: dir}
		worldFit(t, npes, first)
		second := opts
		second.Checkpoint = CheckpointOptions{Dir: dir, Resume: "latest"}
		resumed := worldFit(t, npes, second)
		require.Equal(t, map[int]string{1: "device", 3: "device-sharded"}[npes], resumed[0].strategy)
		require.Equal(t, 12, resumed[0].res.Steps)
		for i, v := range whole[0].params {
			if math.Float32bits(v) != math.Float32bits(resumed[0].params[i]) {
				t.Fatalf("%d PEs, parameter %d: %v in one run, %v resumed at step 6", npes, i, v, resumed[0].params[i])
			}
		}
	}
}

// TestResumeUnderAnotherSchedule: a resume whose schedule gives the next
// step another learning rate than the run that wrote the checkpoint says
// so (and resumes); under the same schedule it says nothing.
func TestResumeUnderAnotherSchedule(t *testing.T) {
	opts := zeroOptions()
	for _, lr := range []float32{opts.LR, 2 * opts.LR} {
		dir := filepath.Join(t.TempDir(), "ck")
		first := opts
		first.MaxSteps, first.Checkpoint = 6, CheckpointOptions{Dir: dir}
		worldFit(t, 1, first)
		var warns []string
		again := opts
		again.LR = lr
		again.Checkpoint = CheckpointOptions{Dir: dir, Resume: "latest"}
		again.Hooks.OnWarning = func(w string) { warns = append(warns, w) }
		r := worldFit(t, 1, again)
		require.Equal(t, 12, r[0].res.Steps)
		if lr == opts.LR {
			require.Empty(t, warns)
			continue
		}
		require.Len(t, warns, 1)
		require.Contains(t, warns[0], "gives step 7 a learning rate of 0.003; this run's gives it 0.006")
	}
}

// TestResumeUnderAnotherRecipe: resuming the last checkpoint of a finished
// cosine schedule under a longer one says that step 7's learning rate was 0
// and is not now (before NextLR recorded 0, it said nothing), and names
// each recorded recipe value the resumed run changes; a resume mid-run with
// the writing run's recipe says nothing.
func TestResumeUnderAnotherRecipe(t *testing.T) {
	run := func(steps int, clip float64, ck CheckpointOptions) []string {
		opts := zeroOptions()
		sched, err := optim.NewCosine(opts.LR, 0, steps)
		require.NoError(t, err)
		opts.MaxSteps, opts.Schedule, opts.Checkpoint = steps, sched, ck
		opts.Recipe = map[string]any{"schedule": "cosine", "max_steps": steps, "clip_norm": float32(clip)}
		var warns []string
		opts.Hooks.OnWarning = func(w string) { warns = append(warns, w) }
		r := worldFit(t, 1, opts)
		require.Equal(t, steps, r[0].res.Steps)
		return warns
	}
	dir := filepath.Join(t.TempDir(), "ck")
	require.Empty(t, run(6, 1, CheckpointOptions{Dir: dir, Every: 3}))
	warns := run(12, 0.5, CheckpointOptions{Dir: dir, Resume: "latest"})
	require.Len(t, warns, 2, "%q", warns)
	require.Contains(t, warns[0], "ckpt-000000006.safetensors was written by a run whose schedule gives step 7 a learning rate of 0; this run's gives it 0.00")
	require.Contains(t, warns[1], "ckpt-000000006.safetensors was written with another recipe: clip_norm 1 → 0.5, max_steps 6 → 12; the resumed steps follow this run's")

	mid := filepath.Join(dir, "ckpt-000000003.safetensors")
	require.Empty(t, run(6, 1, CheckpointOptions{Dir: t.TempDir(), Resume: mid}))
}

// TestRecipeChangesOptimizer: every hyperparameter of the optimizer a
// checkpoint records is compared, whether or not the caller records a
// recipe, and each is named once when the recipe records it too.
func TestRecipeChangesOptimizer(t *testing.T) {
	was := optim.Config{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
	m := ckptMeta{Optimizer: optim.Hyper{Kind: "adamw", Config: was}}
	require.Empty(t, recipeChanges(m, was, nil))
	now := was
	now.Beta2, now.WeightDecay = 0.999, 0
	want := []string{"weight_decay 0.1 → 0", "beta2 0.95 → 0.999"}
	require.Equal(t, want, recipeChanges(m, now, nil))
	m.Recipe = map[string]any{"beta2": 0.95, "weight_decay": 0.1, "lr": 0.001}
	require.Equal(t, want, recipeChanges(m, now, map[string]any{"beta2": float32(0.999), "weight_decay": float32(0), "lr": float32(0.001)}))
	require.Equal(t, []string{"nesterov false → true", "lr 0.001 → 0.002"},
		recipeChanges(ckptMeta{Optimizer: optim.Hyper{Kind: "sgd"}, Recipe: m.Recipe}, optim.Config{Nesterov: true}, map[string]any{"lr": float32(0.002)}))
}

// TestEvaluateInitWeights: Evaluate right after New, on the device step
// path of 2 PEs, gives the weights of Options.InitFrom the test loss and
// accuracy the run that wrote them ended on (train --eval-only), and
// InitSource names the file.
func TestEvaluateInitWeights(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ck")
	opts := zeroOptions()
	opts.Checkpoint = CheckpointOptions{Dir: dir}
	fitted := worldFit(t, 2, opts)
	require.Positive(t, fitted[0].res.Test.Samples)
	again := zeroOptions()
	again.InitFrom = dir
	var source [2]string
	evaluated := worldRun(t, newWorld(2), again, func(tr *Trainer, _, test datasets.Source) (Result, error) {
		m, err := tr.Evaluate(test)
		source[tr.c.MyPE()] = tr.InitSource()
		return Result{Test: m}, err
	})
	for pe := range 2 {
		require.Equal(t, "device-sharded", evaluated[pe].strategy)
		require.Equal(t, fitted[0].res.Test, evaluated[pe].res.Test, "PE %d", pe)
	}
	want := filepath.Join(dir, "ckpt-000000012.safetensors") + " (step 12 of mlp)"
	require.Equal(t, [2]string{want, want}, source)
}
