package ddp

import (
	"fmt"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/datasets"
	"github.com/symddp/symddp/ddp/devicestep"
)

// strategy is how a step's gradients are summed across PEs and applied,
// chosen once, in New (chooseStrategy), from the backend, the engine and the
// options:
//
//   - replicated: backward starts the allreduce of each gradient bucket as
//     soon as it is final; every PE then updates the whole arena
//     (Options.ReplicatedUpdate, a backend that cannot shard, one PE);
//   - sharded (ZeRO-1): backward starts the reduce-scatter of each gradient
//     bucket as soon as it is final, onto the owners of the arena's shards;
//     each PE updates its shard of the parameters and keeps that shard's
//     optimizer state, an all-gather spreads the parameters (a comm.Sharder
//     backend with the arenas in host memory, the default on shm and mpi);
//   - device: the engine runs the whole step on its device, recorded into a
//     graph once and replayed (an engine that offers devicestep.Engine,
//     graph.go), the update sharded (ZeRO-1) where the backend and the
//     engine can and the options do not say otherwise (zero.go, named
//     "device-sharded"); where the options or the backend do not allow it
//     (deviceStepBlocker), replicated steps run eagerly on the device and
//     the engine says why.
type strategy interface {
	// name says which strategy runs, for the start-up log.
	name() string
	// prepare readies the strategy for a run of total steps on train
	// (Fit's start).
	prepare(t *Trainer, total int, train datasets.Source) error
	// step runs optimizer step t.step+1 on global batch (epoch, s);
	// wantStop is this PE's wish to stop after it.
	step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool) (stepResult, error)
	// close releases what prepare allocated.
	close() error
}

func (t *Trainer) chooseStrategy() (strategy, error) {
	if t.sharder != nil {
		return shardedStrategy{}, nil
	}
	if e, ok := t.e.(devicestep.Engine); ok && t.pArena.Host == nil {
		why := t.deviceStepBlocker()
		if why == "" {
			d, off, err := t.deviceSharding()
			if err != nil {
				return nil, err
			}
			if off != "" {
				e.Notice("sharded update off, every PE updates the whole arena: " + off)
			}
			t.dshard = d
			return &deviceStrategy{sharded: d != nil}, nil
		}
		e.Notice("GPU step path off: " + why)
	}
	return replicatedStrategy{}, nil
}

// Strategy names the trainer's gradient-sync strategy: "replicated",
// "sharded", "device" or "device-sharded".
func (t *Trainer) Strategy() string { return t.strat.name() }

type replicatedStrategy struct{}

func (replicatedStrategy) name() string                                 { return "replicated" }
func (replicatedStrategy) prepare(*Trainer, int, datasets.Source) error { return nil }
func (replicatedStrategy) close() error                                 { return nil }
func (replicatedStrategy) step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool) (stepResult, error) {
	return t.hostStep(sm, ds, epoch, s, wantStop, t.replicatedFinish)
}

type shardedStrategy struct{}

func (shardedStrategy) name() string                                 { return "sharded" }
func (shardedStrategy) prepare(*Trainer, int, datasets.Source) error { return nil }
func (shardedStrategy) close() error                                 { return nil }
func (shardedStrategy) step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool) (stepResult, error) {
	return t.hostStep(sm, ds, epoch, s, wantStop, t.shardedFinish)
}

// deviceStrategy runs gpuSteps, made for each run by prepare.
type deviceStrategy struct {
	sharded      bool // the update is sharded (zero.go)
	g            *gpuSteps
	residentNote string // the last run's notice of a training set in device memory ("" when none)
}

func (d *deviceStrategy) name() string {
	if d.sharded {
		return "device-sharded"
	}
	return "device"
}

func (d *deviceStrategy) prepare(t *Trainer, total int, train datasets.Source) (err error) {
	if err := d.close(); err != nil {
		return err
	}
	if err := d.allocState(t); err != nil {
		return err
	}
	defer func() { compute.RecoverDeviceMemory(recover(), &err, "the GPU step path's buffers") }()
	g, err := t.newGPUSteps(total, train)
	d.g, d.residentNote = g, ""
	if g != nil {
		d.residentNote = g.residentNote
	}
	return err
}

// allocState allocates the device's optimizer state (AdamW's two moments:
// 8 bytes a parameter) before the first step, which would otherwise
// allocate it: a GPU without room for it ends Fit with an error saying so
// before any work, not with a panic in the first step.
func (d *deviceStrategy) allocState(t *Trainer) (err error) {
	ds, ok := t.e.(DeviceOptimizerState)
	if !ok || t.o.Slots() == 0 {
		return nil
	}
	n := t.n
	if t.dshard != nil {
		n = t.dshard.stateLen()
	}
	defer func() {
		compute.RecoverDeviceMemory(recover(), &err, fmt.Sprintf("the %s optimizer's state over %d parameters", t.o.Name(), n))
	}()
	_, err = ds.AllocOptimizerState(t.o, n)
	return err
}

func (d *deviceStrategy) step(t *Trainer, sm *datasets.ShardSampler, ds datasets.Source, epoch, s int, wantStop bool) (stepResult, error) {
	return d.g.step(t, sm, ds, epoch, s, wantStop)
}

func (d *deviceStrategy) close() error {
	err := d.g.close()
	d.g = nil
	return err
}
