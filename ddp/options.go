package ddp

import (
	"fmt"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/optim"
)

// Options configures a Trainer. The zero value of a field means its
// documented default.
type Options struct {
	// GlobalBatch is the number of samples of one optimizer step summed
	// over all PEs and micro-batches. It must be a multiple of
	// NPEs·Accumulate.
	GlobalBatch int
	// Accumulate is the number of micro-batches per optimizer step
	// (gradient accumulation; no communication until the last). Default 1.
	Accumulate int
	// Epochs is the number of passes over the training set. Default 1; 0
	// with MaxSteps: as many as MaxSteps takes.
	Epochs int
	// MaxSteps stops training after this many optimizer steps (0: no limit).
	MaxSteps int
	// Seed drives parameter initialisation and the data order.
	Seed uint64

	// LR is the learning rate when Schedule is nil.
	LR float32
	// Schedule gives the learning rate of each step; nil means constant LR.
	Schedule optim.Schedule
	// ClipNorm clips the global gradient norm to this value (0: off).
	ClipNorm float32

	// BucketBytes is the size of a gradient bucket: backward starts a
	// bucket's reduction (its allreduce, or with the sharded update on
	// host arenas the reduce-scatter of that part of the arena onto the
	// owners of its shards) as soon as it has finished that many bytes of
	// gradients. Default 1 MiB; negative means one reduction over the whole
	// arena at the end of backward (no overlap). The bits do not depend on
	// it where the backend's sums have a fixed order (shm, nvshmem). On the
	// device step path the buckets are reduced on the backend's collectives
	// stream beside backward (overlap.go); there the default (0) is
	// DefaultDeviceBucketBytes where each PE has a GPU of its own
	// (comm.DeviceSharer) and one reduction after backward where PEs share
	// a GPU, whose SMs the reductions would take from backward. With a
	// positive size on PEs that share a GPU, New tells the engine before
	// Build (compute/cuda's bf16 GEMMs then take one-block thread-block
	// clusters: with larger ones the bf16 step hung there, docs/GPU.md).
	BucketBytes int

	// ReplicatedUpdate makes every PE run the optimizer over the whole
	// parameter arena after an allreduce of the gradients. By default, on a
	// backend that is a comm.Sharder (shm, mpi) with the arenas in host memory,
	// the update is sharded (ZeRO stage 1): a reduce-scatter, started bucket
	// by bucket during backward (BucketBytes), leaves each PE
	// the summed gradients of its 1/NPEs of the arena, it checks, clips and
	// updates that shard and keeps only that shard's optimizer state (in the
	// symmetric heap), and an all-gather spreads the updated parameters. The
	// parameters are bit for bit those of the replicated update where the
	// reduce-scatter is the allreduce's own fold (shm; mpi in hierarchical
	// mode) and there is no clipping (with it, the global norm is summed
	// shard by shard, which can change its last bits); flat MPI adds in its
	// own order either way. On the device step path the update is sharded
	// likewise where the backend reduce-scatters and all-gathers on the
	// engine's stream (nvshmem) and the engine updates a shard
	// (devicestep.ShardedUpdater); see zero.go. Each PE's engine then keeps
	// the optimizer state of its shard only.
	ReplicatedUpdate bool

	// GradDType is the type the gradients are reduced in across PEs:
	// comm.Float32 (the default, also for 0) or comm.BFloat16, which halves
	// the bytes of the reduction and rounds each PE's gradients and their
	// sum to bf16 (the update stays fp32). bf16 needs the device step path
	// (graddtype.go); New fails elsewhere.
	GradDType comm.Kind

	// DeviceData keeps the training set in device memory on the device
	// step path, each batch gathered there by index, so that a step copies
	// indices instead of samples: DeviceDataAuto (the default) when the
	// engine can (compute.DeviceRows), the source is rows of one array
	// (datasets.RowData) of float inputs with a label each, and they take
	// at most DeviceDataMaxBytes; DeviceDataOn the same, an error when it
	// cannot; DeviceDataOff never.
	DeviceData DeviceDataMode

	// LogEvery is the number of steps between metric reports (loss and
	// accuracy reduced across PEs, OnLog hooks). Default 50.
	LogEvery int
	// CheckReplicasEvery hashes the parameter arena on every PE and compares
	// the hashes every so many steps (0: only at the end of Fit, which
	// always checks).
	CheckReplicasEvery int
	// SkipNonFinite skips a step whose loss or gradients are NaN or Inf
	// instead of stopping with an error.
	SkipNonFinite bool
	// EvalEvery evaluates on the test set at the end of every EvalEvery
	// epochs (0: only at the end of Fit).
	EvalEvery int
	// EvalEverySteps evaluates on the test set every so many steps (0: off),
	// reporting through Hooks.OnEval: a language model's validation loss.
	EvalEverySteps int
	// EvalLimit evaluates on the first EvalLimit test samples only (0: all).
	EvalLimit int

	// InitFrom starts training from the parameters of a Hugging Face
	// GPT-2 or Llama directory or a symddp checkpoint instead of the seed's
	// initialisation: weights only, the optimizer state, step count,
	// schedule and data start fresh (fine-tuning). See ReadInitWeights for
	// what it reads and checks. PE 0 reads it in New and broadcasts it;
	// when it cannot, every PE's New returns the same *InitError. It
	// cannot be combined with Checkpoint.Resume.
	InitFrom string

	// Checkpoint configures saving and resuming; zero means no checkpoints.
	Checkpoint CheckpointOptions
	// Recipe is what the caller wants checkpoints to record of how the run
	// was configured (train's resolved recipe: every hyperparameter of the
	// optimizer, schedule, clipping and batch), written as JSON into the
	// checkpoint's metadata under "recipe"; nil records nothing.
	Recipe map[string]any

	// Hooks are called on every PE; see Hooks.
	Hooks Hooks
}

// CheckpointOptions configures checkpoints.
type CheckpointOptions struct {
	// Dir is where checkpoints are written ("" disables them).
	Dir string
	// Every writes a checkpoint every so many steps (0: only at the end).
	// It needs Dir.
	Every int
	// Keep is the number of checkpoints kept in Dir (default 3).
	Keep int
	// Resume is "" (start fresh), "latest" (the newest valid checkpoint in
	// Dir, which it needs; fresh when Dir holds none) or a checkpoint
	// file's path (without Dir: resumed, then no checkpoints). A fresh
	// start in a Dir that holds checkpoints is refused
	// (ErrCheckpointDirInUse): it would overwrite and prune them.
	Resume string
}

// Steps is the number of optimizer steps Fit trains on a training set of
// samples samples with these options: Epochs passes of ⌈samples /
// GlobalBatch⌉ steps (one pass when neither Epochs nor MaxSteps is set), or
// MaxSteps when that is fewer or Epochs is 0. A schedule that ends (a
// cosine's Total) is made for this many steps.
func (o Options) Steps(samples int) int {
	if o.GlobalBatch < 1 {
		return 0
	}
	return runSteps(o.Epochs, o.MaxSteps, (samples+o.GlobalBatch-1)/o.GlobalBatch)
}

func (o *Options) setDefaults() {
	if o.Accumulate == 0 {
		o.Accumulate = 1
	}
	if o.Epochs == 0 && o.MaxSteps == 0 {
		o.Epochs = 1
	}
	if o.BucketBytes == 0 {
		o.BucketBytes = 1 << 20
	}
	if o.LogEvery == 0 {
		o.LogEvery = 50
	}
	if o.Checkpoint.Keep == 0 {
		o.Checkpoint.Keep = 3
	}
}

func (o *Options) validate(npes int) error {
	switch {
	case o.GlobalBatch <= 0:
		return fmt.Errorf("global batch size %d: must be positive", o.GlobalBatch)
	case o.Accumulate < 1:
		return fmt.Errorf("gradient accumulation %d: must be at least 1", o.Accumulate)
	case o.GlobalBatch%(npes*o.Accumulate) != 0:
		q := npes * o.Accumulate
		lo := o.GlobalBatch / q * q
		if lo == 0 {
			lo = q
		}
		return fmt.Errorf("global batch size %d is not a multiple of %d PEs x %d micro-batches: use %d or %d",
			o.GlobalBatch, npes, o.Accumulate, lo, lo+q)
	case o.Epochs < 0:
		return fmt.Errorf("epochs %d: must not be negative", o.Epochs)
	case o.MaxSteps < 0:
		return fmt.Errorf("max steps %d: must not be negative", o.MaxSteps)
	case o.Schedule == nil && !(o.LR > 0):
		return fmt.Errorf("learning rate %g: must be positive", o.LR)
	case o.ClipNorm < 0:
		return fmt.Errorf("clip norm %g: must not be negative", o.ClipNorm)
	case o.LogEvery < 0 || o.CheckReplicasEvery < 0 || o.EvalEvery < 0 || o.EvalEverySteps < 0 || o.EvalLimit < 0 || o.Checkpoint.Every < 0:
		return fmt.Errorf("log, replica-check, eval and checkpoint intervals must not be negative")
	case o.Checkpoint.Keep < 1:
		return fmt.Errorf("keep-checkpoints %d: must be at least 1", o.Checkpoint.Keep)
	case o.Checkpoint.Dir == "" && o.Checkpoint.Resume == "latest":
		return fmt.Errorf("checkpoint resume %q needs Checkpoint.Dir, the directory to take the newest checkpoint from (or give Resume a checkpoint file's path)", o.Checkpoint.Resume)
	case o.Checkpoint.Dir == "" && o.Checkpoint.Every > 0:
		return fmt.Errorf("checkpoint every %d steps needs Checkpoint.Dir, the directory to write them to", o.Checkpoint.Every)
	case o.InitFrom != "" && o.Checkpoint.Resume != "":
		return fmt.Errorf("init from %s and resume from %s: a resumed run continues its checkpoint's weights; give one of the two", o.InitFrom, o.Checkpoint.Resume)
	}
	return nil
}

func (o *Options) lr(step int) float32 {
	if o.Schedule != nil {
		return o.Schedule.LR(step)
	}
	return o.LR
}

// DeviceDataMode says whether the device step path keeps the training set in
// device memory (Options.DeviceData).
type DeviceDataMode int

// DeviceData modes.
const (
	DeviceDataAuto DeviceDataMode = iota
	DeviceDataOff
	DeviceDataOn
)

// DeviceDataMaxBytes is the largest training set DeviceDataAuto keeps in
// device memory.
const DeviceDataMaxBytes = 4 << 30
