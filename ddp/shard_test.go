package ddp_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch/launchtest"
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/cpu"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp"
	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// TestShardedUpdateIsReplicatedUpdate: the sharded update (ZeRO-1, the
// default on shm) leaves the parameters bit for bit where the replicated
// one does, for SGD with momentum and Adam, with uneven shards (3 PEs) and
// with gradient accumulation; with clipping the losses agree to rounding.
func TestShardedUpdateIsReplicatedUpdate(t *testing.T) {
	cases := []struct {
		name, opt string
		npes, acc int
		clip      float32
	}{
		{"sgd-3pes", "sgd", 3, 1, 0},
		{"adam-3pes", "adam", 3, 1, 0},
		{"sgd-2pes-acc2", "sgd", 2, 2, 0},
		{"adam-4pes-clip", "adam", 4, 1, 0.05},
	}
	for _, tc := range cases {
		recs := map[bool]record{}
		for _, replicated := range []bool{false, true} {
			recs[replicated] = runJob(t, fmt.Sprintf("%s-replicated=%v", tc.name, replicated), tc.npes, func(t *testing.T, c comm.Comm) record {
				o := baseOpts()
				o.GlobalBatch, o.MaxSteps, o.Accumulate = 12*tc.npes*tc.acc, 30, tc.acc
				o.ClipNorm, o.ReplicatedUpdate = tc.clip, replicated
				o.CheckReplicasEvery = 10
				if tc.opt == "adam" {
					o.LR = 1e-3
				}
				o.Hooks.OnStart = func(s ddp.StartInfo) {
					if s.ShardedUpdate == replicated {
						t.Errorf("PE %d: ShardedUpdate %v with ReplicatedUpdate %v", s.PE, s.ShardedUpdate, replicated)
					}
					if want := map[bool]string{false: "one reduce-scatter ", true: "one allreduce "}[replicated]; !strings.HasPrefix(s.Reduction, want) {
						t.Errorf("PE %d: Reduction %q, want %q... (the mlp's arena is one bucket)", s.PE, s.Reduction, want)
					}
				}
				return trainIn(t, c, tc.opt, o, context.Background())
			})
		}
		if launchtest.InPE() {
			continue
		}
		sh, rep := recs[false], recs[true]
		for _, r := range []record{sh, rep} {
			if r.Err != "" || !r.Identity || r.Steps != 30 {
				t.Fatalf("%s: err %q, replicas identical %v, %d steps", tc.name, r.Err, r.Identity, r.Steps)
			}
		}
		if tc.clip == 0 && sh.Hash != rep.Hash {
			t.Fatalf("%s: parameter hash %016x sharded, %016x replicated", tc.name, sh.Hash, rep.Hash)
		}
		for i := range rep.Losses {
			if d := math.Abs(sh.Losses[i] - rep.Losses[i]); d > 1e-5*math.Max(1, rep.Losses[i]) {
				t.Fatalf("%s: step %d: loss %.7f sharded, %.7f replicated", tc.name, i+1, sh.Losses[i], rep.Losses[i])
			}
		}
	}
}

// poisoned wraps a model: on PE 0, after the backward of step `at`, it sets
// the last gradient element to +Inf. The loss stays finite and the element
// lies in the last PE's shard, so only the exchange of verdicts after the
// reduce-scatter can tell the other PEs.
type poisoned struct {
	models.Model
	pe, at, calls int
	last          compute.Tensor
}

func (p *poisoned) Build(e compute.Engine, params, grads []compute.Tensor, batch int) error {
	p.last = grads[len(grads)-1]
	return p.Model.Build(e, params, grads, batch)
}

func (p *poisoned) Backward(ready func(int)) {
	p.Model.Backward(ready)
	p.calls++
	if p.pe == 0 && p.calls == p.at {
		g := compute.HostData(p.last)
		g[len(g)-1] = float32(math.Inf(1))
	}
}

// TestShardedUpdateAgreesOnNonFiniteShard: an Inf gradient that only the
// owner of its shard sees after the reduce-scatter stops every PE at the
// same step with the non-finite error, or, with SkipNonFinite, is skipped by
// every PE, leaving the replicas identical.
func TestShardedUpdateAgreesOnNonFiniteShard(t *testing.T) {
	for _, skip := range []bool{false, true} {
		rec := runJob(t, fmt.Sprintf("skip=%v", skip), 3, func(t *testing.T, c comm.Comm) record {
			e, err := cpu.New(cpu.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			inner, err := models.New("mlp", models.Config{Input: []int{32}, Classes: 10, Hidden: []int{64, 64}})
			if err != nil {
				t.Fatal(err)
			}
			m := &poisoned{Model: inner, pe: c.MyPE(), at: 4}
			o, err := optim.New("sgd", optim.Config{Momentum: 0.9})
			if err != nil {
				t.Fatal(err)
			}
			opts := baseOpts()
			opts.GlobalBatch, opts.MaxSteps, opts.SkipNonFinite = 48, 10, skip
			var skipped []int
			opts.Hooks.OnStep = func(s ddp.StepInfo) {
				if s.Skipped {
					skipped = append(skipped, s.Step)
				}
			}
			tr, err := ddp.New(c, e, m, o, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !tr.ShardedUpdate() {
				t.Fatal("the update is not sharded")
			}
			train, test := smallData(t)
			res, err := tr.Fit(context.Background(), train, test)
			rec := recordOf(res, err)
			if skip && (len(skipped) != 1 || skipped[0] != 4) {
				t.Errorf("PE %d: skipped steps %v, want [4]", c.MyPE(), skipped)
			}
			if !skip && (err == nil || !strings.Contains(err.Error(), "step 4 ") || !strings.Contains(err.Error(), "not finite")) {
				t.Errorf("PE %d: error %v, want step 4's non-finite error", c.MyPE(), err)
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			return rec
		})
		if launchtest.InPE() {
			continue
		}
		if skip && (rec.Err != "" || rec.Steps != 10 || !rec.Identity) {
			t.Fatalf("with SkipNonFinite: err %q, %d steps, replicas identical %v; want no error, 10 steps, identical", rec.Err, rec.Steps, rec.Identity)
		}
	}
}

// TestShardedUpdateWithEmptyShards: a model of 30 parameters at 4 PEs gives
// shards [0,16), [16,30) and two empty ones; the sharded update still ends
// where the replicated one does, bit for bit, with momentum state.
func TestShardedUpdateWithEmptyShards(t *testing.T) {
	hashes := map[bool]uint64{}
	for _, replicated := range []bool{false, true} {
		rec := runJob(t, fmt.Sprintf("replicated=%v", replicated), 4, func(t *testing.T, c comm.Comm) record {
			e, err := cpu.New(cpu.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			m, err := models.New("mlp", models.Config{Input: []int{4}, Classes: 2, Hidden: []int{4}})
			if err != nil {
				t.Fatal(err)
			}
			o, err := optim.New("sgd", optim.Config{Momentum: 0.9})
			if err != nil {
				t.Fatal(err)
			}
			train, test, err := datasets.SyntheticSplit(256, 64, 4, 2, 5)
			if err != nil {
				t.Fatal(err)
			}
			opts := ddp.Options{GlobalBatch: 32, Epochs: 5, MaxSteps: 25, Seed: 9, LR: 0.1, ReplicatedUpdate: replicated}
			tr, err := ddp.New(c, e, m, o, opts)
			if err != nil {
				t.Fatal(err)
			}
			if tr.NumParams() != 30 || tr.ShardedUpdate() == replicated {
				t.Fatalf("%d parameters, sharded %v; want 30, %v", tr.NumParams(), tr.ShardedUpdate(), !replicated)
			}
			rec := recordOf(tr.Fit(context.Background(), train, test))
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			return rec
		})
		if launchtest.InPE() {
			continue
		}
		if rec.Err != "" || rec.Steps != 25 || !rec.Identity {
			t.Fatalf("replicated=%v: err %q, %d steps, replicas identical %v", replicated, rec.Err, rec.Steps, rec.Identity)
		}
		hashes[replicated] = rec.Hash
	}
	if !launchtest.InPE() && hashes[false] != hashes[true] {
		t.Fatalf("parameter hash %016x sharded, %016x replicated", hashes[false], hashes[true])
	}
}

// inBackward wraps a model and says whether its backward is running.
type inBackward struct {
	models.Model
	running bool
}

func (m *inBackward) Backward(ready func(int)) {
	m.running = true
	m.Model.Backward(ready)
	m.running = false
}

// partsSeen is a comm.Sharder that counts the reduce-scatters of parts
// started while the model's backward runs and after it.
type partsSeen struct {
	comm.Comm
	s             comm.Sharder
	m             *inBackward
	during, after int
}

func (c *partsSeen) ReduceScatter(b comm.Buffer, off, n int, op comm.Op) error {
	return c.s.ReduceScatter(b, off, n, op)
}

func (c *partsSeen) AllGather(b comm.Buffer, off, n int) error { return c.s.AllGather(b, off, n) }

func (c *partsSeen) IReduceScatter(b comm.Buffer, off, n, lo, hi int, op comm.Op) (comm.Request, error) {
	if c.m.running {
		c.during++
	} else {
		c.after++
	}
	return c.s.IReduceScatter(b, off, n, lo, hi, op)
}

// TestShardedBucketsKeepTheBits: the sharded update reduce-scatters each
// gradient bucket onto the owners of the arena's shards while backward
// runs, and the parameters end bit for bit where one reduce-scatter of the
// whole arena after backward (BucketBytes -1) and the replicated update
// leave them: with the default bucket size (one bucket for this small
// model), with a bucket per layer whose parts straddle the shards of 3
// PEs, with Adam, and with gradient accumulation (only the last
// micro-batch's backward reduces).
func TestShardedBucketsKeepTheBits(t *testing.T) {
	cases := []struct {
		name, opt string
		npes, acc int
	}{
		{"adam-3pes", "adam", 3, 1},
		{"sgd-2pes-acc3", "sgd", 2, 3},
	}
	variants := []struct {
		name       string
		bucket     int
		replicated bool
		// parts started during each step's backward and after it
		during, after int
	}{
		// the 6922 parameters never fill a bucket of 1 MiB: one part after backward
		{"sharded-default-buckets", 0, false, 0, 1},
		// every layer's parameters fill a bucket of one element
		{"sharded-bucket-per-layer", 4, false, 3, 0},
		// one part at the first layer's ready, the end of backward
		{"sharded-no-buckets", -1, false, 1, 0},
		{"replicated", 0, true, 0, 0},
	}
	const steps = 20
	for _, tc := range cases {
		hashes := make([]uint64, len(variants))
		for vi, v := range variants {
			rec := runJob(t, tc.name+"-"+v.name, tc.npes, func(t *testing.T, c comm.Comm) record {
				e, err := cpu.New(cpu.Options{Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				inner, err := models.New("mlp", models.Config{Input: []int{32}, Classes: 10, Hidden: []int{64, 64}})
				if err != nil {
					t.Fatal(err)
				}
				m := &inBackward{Model: inner}
				oc, err := optim.DefaultConfig(tc.opt)
				if err != nil {
					t.Fatal(err)
				}
				o, err := optim.New(tc.opt, oc)
				if err != nil {
					t.Fatal(err)
				}
				pc := &partsSeen{Comm: c, s: c.(comm.Sharder), m: m}
				opts := baseOpts()
				opts.GlobalBatch, opts.MaxSteps, opts.Accumulate = 12*tc.npes*tc.acc, steps, tc.acc
				opts.BucketBytes, opts.ReplicatedUpdate = v.bucket, v.replicated
				if tc.opt == "adam" {
					opts.LR = 1e-3
				}
				tr, err := ddp.New(pc, e, m, o, opts)
				if err != nil {
					t.Fatal(err)
				}
				if tr.ShardedUpdate() == v.replicated {
					t.Fatalf("sharded update %v with ReplicatedUpdate %v", tr.ShardedUpdate(), v.replicated)
				}
				train, test := smallData(t)
				rec := recordOf(tr.Fit(context.Background(), train, test))
				if err := tr.Close(); err != nil {
					t.Fatal(err)
				}
				if pc.during != v.during*steps || pc.after != v.after*steps {
					t.Errorf("PE %d: %d parts reduce-scattered during backward and %d after it in %d steps, want %d and %d a step",
						c.MyPE(), pc.during, pc.after, steps, v.during, v.after)
				}
				return rec
			})
			if launchtest.InPE() {
				continue
			}
			if rec.Err != "" || rec.Steps != steps || !rec.Identity {
				t.Fatalf("%s %s: err %q, %d steps, replicas identical %v", tc.name, v.name, rec.Err, rec.Steps, rec.Identity)
			}
			hashes[vi] = rec.Hash
		}
		if launchtest.InPE() {
			continue
		}
		for vi, v := range variants {
			if hashes[vi] != hashes[0] {
				t.Errorf("%s: parameter hash %016x %s, %016x %s", tc.name, hashes[vi], v.name, hashes[0], variants[0].name)
			}
		}
	}
}
