package ddp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch/launchtest"
	_ "github.com/symddp/symddp/comm/shm"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// envOut names the directory where PE 0 of a test job writes its record.
const envOut = "DDP_TEST_OUT"

// record is what a test job's PE 0 reports to the parent test.
type record struct {
	Losses   []float64 // training loss of every step (LogEvery 1)
	Hash     uint64    // parameter arena hash at the end
	Steps    int
	Stopped  bool
	TestAcc  float64
	Err      string
	Identity bool
	Warnings []string // what Hooks.OnWarning was given (trainIn, unless the options set it)
}

// smallData is a synthetic problem small enough for 8 PEs on 2 cores.
func smallData(t testing.TB) (train, test *datasets.InMemory) {
	train, test, err := datasets.SyntheticSplit(1024, 256, 32, 10, 7)
	if err != nil {
		t.Fatal(err)
	}
	return train, test
}

// trainIn trains an mlp 32-64-64-10 in the PE and returns its record.
func trainIn(t *testing.T, c comm.Comm, optName string, opts ddp.Options, ctx context.Context) record {
	t.Helper()
	e, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	train, test := smallData(t)
	m, err := models.New("mlp", models.Config{Input: []int{32}, Classes: 10, Hidden: []int{64, 64}})
	if err != nil {
		t.Fatal(err)
	}
	oc, err := optim.DefaultConfig(optName)
	if err != nil {
		t.Fatal(err)
	}
	if optName == "sgd" {
		oc.Momentum = 0.9
	}
	o, err := optim.New(optName, oc)
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	opts.LogEvery = 1
	opts.Hooks.OnLog = func(l ddp.LogInfo) { rec.Losses = append(rec.Losses, l.Loss) }
	if opts.Hooks.OnWarning == nil {
		opts.Hooks.OnWarning = func(w string) { rec.Warnings = append(rec.Warnings, w) }
	}
	tr, err := ddp.New(c, e, m, o, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Fit(ctx, train, test)
	losses, warnings := rec.Losses, rec.Warnings
	rec = recordOf(res, err)
	rec.Losses, rec.Warnings = losses, warnings
	if err := tr.Close(); err != nil && rec.Err == "" {
		t.Fatal(err)
	}
	return rec
}

// recordOf is what a job reports of a Fit.
func recordOf(res ddp.Result, err error) record {
	var rec record
	if err != nil {
		rec.Err = err.Error()
	}
	rec.Steps, rec.Stopped, rec.TestAcc = res.Steps, res.Stopped, res.Test.Accuracy
	if len(res.Replicas.Hashes) > 0 {
		rec.Hash, rec.Identity = res.Replicas.Hashes[0], res.Replicas.Identical
	}
	return rec
}

// newLocalTrainer builds an mlp 32-hidden-hidden-10 trainer with SGD
// momentum on c.
func newLocalTrainer(t *testing.T, c comm.Comm, hidden int, opts ddp.Options) *ddp.Trainer {
	t.Helper()
	e, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := models.New("mlp", models.Config{Input: []int{32}, Classes: 10, Hidden: []int{hidden, hidden}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := optim.New("sgd", optim.Config{Momentum: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ddp.New(c, e, m, o, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// writeRecord is called by PE 0 of a job.
func writeRecord(t *testing.T, c comm.Comm, rec record) {
	if c.MyPE() != 0 {
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(os.Getenv(envOut), "record.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runJob runs body in npes PEs as subtest name and returns PE 0's record.
// In a PE process only the subtest of that PE's job runs: callers return
// early when launchtest.InPE().
func runJob(t *testing.T, name string, npes int, body func(t *testing.T, c comm.Comm) record) record {
	t.Helper()
	var rec record
	t.Run(name, func(t *testing.T) {
		dir := t.TempDir()
		launchtest.Run(t, launchtest.Job{NPEs: npes, Env: []string{envOut + "=" + dir}}, func(t *testing.T, c comm.Comm) {
			writeRecord(t, c, body(t, c))
		})
		b, err := os.ReadFile(filepath.Join(dir, "record.json"))
		if err != nil {
			t.Fatalf("PE 0 wrote no record: %v", err)
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
	})
	if !launchtest.InPE() && t.Failed() {
		t.FailNow()
	}
	return rec
}

func baseOpts() ddp.Options {
	return ddp.Options{GlobalBatch: 64, Epochs: 10, MaxSteps: 50, Seed: 3, LR: 0.05}
}

// TestPEsAgree: the same seed and global batch give the same losses at
// --pes 1 and --pes 4 for 50 steps, up to float32 summation order.
func TestPEsAgree(t *testing.T) {
	body := func(t *testing.T, c comm.Comm) record {
		return trainIn(t, c, "sgd", baseOpts(), context.Background())
	}
	one := runJob(t, "pes1", 1, body)
	four := runJob(t, "pes4", 4, body)
	if launchtest.InPE() {
		return
	}
	for _, r := range []record{one, four} {
		if r.Err != "" {
			t.Fatalf("training failed: %s", r.Err)
		}
		if len(r.Losses) != 50 || r.Steps != 50 || !r.Identity {
			t.Fatalf("got %d losses, %d steps, replicas identical %v; want 50, 50, true", len(r.Losses), r.Steps, r.Identity)
		}
	}
	for i := range one.Losses {
		if d := math.Abs(one.Losses[i] - four.Losses[i]); d > 1e-4*math.Max(1, math.Abs(one.Losses[i])) {
			t.Fatalf("step %d: loss %.7f at 1 PE, %.7f at 4 PEs", i+1, one.Losses[i], four.Losses[i])
		}
	}
	if one.Losses[49] > 0.5*one.Losses[0] {
		t.Fatalf("loss did not fall: %.4f -> %.4f", one.Losses[0], one.Losses[49])
	}
}

// TestBucketsDoNotChangeBits: overlapping the allreduce with backward in
// small buckets gives the same parameters, bit for bit, as one allreduce
// after backward (the sum of every element is in PE order either way).
func TestBucketsDoNotChangeBits(t *testing.T) {
	hashes := map[int]uint64{}
	for _, bucket := range []int{-1, 256, 4096} {
		rec := runJob(t, fmt.Sprintf("bucket%d", bucket), 3, func(t *testing.T, c comm.Comm) record {
			o := baseOpts()
			o.GlobalBatch = 63
			o.MaxSteps = 20
			o.BucketBytes = bucket
			o.ReplicatedUpdate = true // buckets are the replicated update's
			o.CheckReplicasEvery = 5
			return trainIn(t, c, "adam", withLR(o, 1e-3), context.Background())
		})
		if launchtest.InPE() {
			continue
		}
		if rec.Err != "" || !rec.Identity {
			t.Fatalf("bucket %d: err %q, replicas identical %v", bucket, rec.Err, rec.Identity)
		}
		hashes[bucket] = rec.Hash
	}
	if launchtest.InPE() {
		return
	}
	if hashes[-1] != hashes[256] || hashes[-1] != hashes[4096] {
		t.Fatalf("parameter hashes differ by bucket size: %x", hashes)
	}
}

func withLR(o ddp.Options, lr float32) ddp.Options { o.LR = lr; return o }

// TestAccumulationMatchesLargerJob: 2 PEs x 2 micro-batches see the same
// global batches as 4 PEs x 1 and give the same losses up to rounding.
func TestAccumulationMatchesLargerJob(t *testing.T) {
	acc := runJob(t, "acc2x2", 2, func(t *testing.T, c comm.Comm) record {
		o := baseOpts()
		o.Accumulate, o.MaxSteps = 2, 20
		return trainIn(t, c, "sgd", o, context.Background())
	})
	plain := runJob(t, "plain4", 4, func(t *testing.T, c comm.Comm) record {
		o := baseOpts()
		o.MaxSteps = 20
		return trainIn(t, c, "sgd", o, context.Background())
	})
	if launchtest.InPE() {
		return
	}
	if acc.Err != "" || plain.Err != "" {
		t.Fatalf("errors: %q, %q", acc.Err, plain.Err)
	}
	for i := range plain.Losses {
		if d := math.Abs(acc.Losses[i] - plain.Losses[i]); d > 1e-4 {
			t.Fatalf("step %d: loss %.7f with accumulation, %.7f without", i+1, acc.Losses[i], plain.Losses[i])
		}
	}
}

// TestStopAgreedAcrossPEs: only PE 1 is asked to stop (its context is
// cancelled at step 5), yet every PE stops after the same step.
func TestStopAgreedAcrossPEs(t *testing.T) {
	rec := runJob(t, "stop", 3, func(t *testing.T, c comm.Comm) record {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o := baseOpts()
		o.GlobalBatch, o.MaxSteps = 63, 40
		if c.MyPE() == 1 {
			o.Hooks.OnStep = func(s ddp.StepInfo) {
				if s.Step == 5 {
					cancel()
				}
			}
		}
		rec := trainIn(t, c, "sgd", o, ctx)
		if !rec.Stopped || rec.Steps != 6 {
			t.Errorf("PE %d: stopped %v after %d steps; want stopped after 6", c.MyPE(), rec.Stopped, rec.Steps)
		}
		return rec
	})
	if launchtest.InPE() {
		return
	}
	if rec.Err != "" || !rec.Identity {
		t.Fatalf("err %q, replicas identical %v", rec.Err, rec.Identity)
	}
}

// TestNonFiniteStopsWithStep: a NaN learning rate schedule makes the loss
// NaN; the trainer stops naming the step, or skips with SkipNonFinite.
func TestNonFiniteStopsWithStep(t *testing.T) {
	rec := runJob(t, "stop", 2, func(t *testing.T, c comm.Comm) record {
		o := baseOpts()
		o.LR = 1e30 // diverges within a few steps
		return trainIn(t, c, "sgd", o, context.Background())
	})
	skip := runJob(t, "skip", 2, func(t *testing.T, c comm.Comm) record {
		o := baseOpts()
		o.LR = 1e30
		o.SkipNonFinite = true
		return trainIn(t, c, "sgd", o, context.Background())
	})
	if launchtest.InPE() {
		return
	}
	if !strings.Contains(rec.Err, "not finite") || !strings.Contains(rec.Err, "step ") {
		t.Fatalf("error %q: want a non-finite error naming the step", rec.Err)
	}
	if skip.Err != "" || skip.Steps != 50 || !skip.Identity {
		t.Fatalf("with SkipNonFinite: err %q after %d steps (identical %v); want 50 steps, no error", skip.Err, skip.Steps, skip.Identity)
	}
}

// tinyParts opens a one-PE shm comm (closed when t ends) and makes what
// New takes besides: a CPU engine, an mlp 8-4-10 and SGD.
func tinyParts(t *testing.T) (comm.Comm, compute.Engine, models.Model, optim.Optimizer) {
	t.Helper()
	c, err := comm.Open("shm", comm.Config{NPEs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	e, _ := cpu.New(cpu.Options{Threads: 1})
	m, _ := models.New("mlp", models.Config{Input: []int{8}, Hidden: []int{4}})
	o, _ := optim.New("sgd", optim.Config{})
	return c, e, m, o
}

// TestOptionErrors: bad options are errors that say what to use instead.
func TestOptionErrors(t *testing.T) {
	c, e, m, o := tinyParts(t)
	for _, tc := range []struct {
		opts ddp.Options
		want string
	}{
		{ddp.Options{GlobalBatch: 0, LR: 1}, "must be positive"},
		{ddp.Options{GlobalBatch: 10, Accumulate: 3, LR: 1}, "use 9 or 12"},
		{ddp.Options{GlobalBatch: 8}, "learning rate"},
		{ddp.Options{GlobalBatch: 8, LR: 1, ClipNorm: -1}, "clip norm"},
		{ddp.Options{GlobalBatch: 8, LR: 1, InitFrom: "hf", Checkpoint: ddp.CheckpointOptions{Dir: "ck", Resume: "latest"}},
			"init from hf and resume from latest: a resumed run continues its checkpoint's weights; give one of the two"},
		// without a directory these would start afresh and write nothing,
		// silently (train refuses the same flags)
		{ddp.Options{GlobalBatch: 8, LR: 1, Checkpoint: ddp.CheckpointOptions{Resume: "latest"}},
			`checkpoint resume "latest" needs Checkpoint.Dir`},
		{ddp.Options{GlobalBatch: 8, LR: 1, Checkpoint: ddp.CheckpointOptions{Every: 5}},
			"checkpoint every 5 steps needs Checkpoint.Dir"},
	} {
		_, err := ddp.New(c, e, m, o, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
	tr, err := ddp.New(c, e, m, o, ddp.Options{GlobalBatch: 8, LR: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	wrong, _, _ := datasets.SyntheticSplit(64, 16, 9, 10, 1)
	if _, err := tr.Fit(context.Background(), wrong, nil); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("Fit on 9-feature data for an 8-input model = %v, want a shape error", err)
	}
}
