package ddp

import (
	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
)

// strategy is how a step's gradients are summed across PEs and applied,
// chosen once, in New (chooseStrategy), from the backend, the engine and the
// options:
//
//   - replicated: backward starts the allreduce of each gradient bucket as
//     soon as it is final; every PE then updates the whole arena
//     (Options.ReplicatedUpdate, a backend that cannot shard, one PE);
//   - sharded (ZeRO-1): one reduce-scatter after backward, each PE updates
//     its shard of the parameters and keeps that shard's optimizer state,
//     an all-gather spreads the parameters (a comm.Sharder backend with the
//     arenas in host memory, the default on shm and mpi);
//   - device: the engine runs the whole step on its device, recorded into a
//     graph once and replayed (an engine that offers compute.DeviceSteps,
//     graph.go), falling back to replicated steps run eagerly where its
//     conditions do not hold.
type strategy interface {
	// name says which strategy runs, for the start-up log.
	name() string
	// prepare readies the strategy for a run of total steps (Fit's start).
	prepare(t *Trainer, total int) error
	// step runs optimizer step t.step+1 on global batch (epoch, s);
	// wantStop is this PE's wish to stop after it.
	step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool) (stepResult, error)
	// close releases what prepare allocated.
	close() error
}

func (t *Trainer) chooseStrategy() strategy {
	switch {
	case t.sharder != nil:
		return shardedStrategy{}
	case t.pArena.Host == nil:
		if _, ok := t.e.(compute.DeviceSteps); ok {
			return &deviceStrategy{}
		}
	}
	return replicatedStrategy{}
}

// Strategy names the trainer's gradient-sync strategy: "replicated",
// "sharded" or "device".
func (t *Trainer) Strategy() string { return t.strat.name() }

type replicatedStrategy struct{}

func (replicatedStrategy) name() string                    { return "replicated" }
func (replicatedStrategy) prepare(_ *Trainer, _ int) error { return nil }
func (replicatedStrategy) close() error                    { return nil }
func (replicatedStrategy) step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool) (stepResult, error) {
	return t.hostStep(sm, ds, epoch, s, wantStop, true, t.replicatedFinish)
}

type shardedStrategy struct{}

func (shardedStrategy) name() string                    { return "sharded" }
func (shardedStrategy) prepare(_ *Trainer, _ int) error { return nil }
func (shardedStrategy) close() error                    { return nil }
func (shardedStrategy) step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool) (stepResult, error) {
	return t.hostStep(sm, ds, epoch, s, wantStop, false, t.shardedFinish)
}

// deviceStrategy runs gpuSteps when its conditions hold for the run, and
// replicated host steps (eager on the device) otherwise.
type deviceStrategy struct {
	g *gpuSteps
}

func (d *deviceStrategy) name() string { return "device" }

func (d *deviceStrategy) prepare(t *Trainer, total int) error {
	if err := d.close(); err != nil {
		return err
	}
	g, why, err := t.newGPUSteps(total)
	if err != nil {
		return err
	}
	if why != "" {
		if n, ok := t.e.(interface{ Notice(string) }); ok {
			n.Notice("GPU step path off: " + why)
		}
	}
	d.g = g
	return nil
}

func (d *deviceStrategy) step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool) (stepResult, error) {
	if d.g == nil {
		return t.hostStep(sm, ds, epoch, s, wantStop, true, t.replicatedFinish)
	}
	return d.g.step(t, sm, ds, epoch, s, wantStop)
}

func (d *deviceStrategy) close() error {
	err := d.g.close()
	d.g = nil
	return err
}
