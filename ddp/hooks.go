package ddp

import "time"

// Hooks are called by Fit on every PE, from the training goroutine. Any of
// them may be nil. A hook must not call collective operations of the Comm.
type Hooks struct {
	// OnStart is called once after the arenas are built and the initial
	// parameters are in place (broadcast or resumed).
	OnStart func(StartInfo)
	// OnStep is called after every optimizer step.
	OnStep func(StepInfo)
	// OnLog is called every LogEvery steps with metrics reduced over PEs.
	OnLog func(LogInfo)
	// OnEpochEnd is called after each epoch (with test metrics when the
	// epoch was evaluated).
	OnEpochEnd func(EpochInfo)
	// OnEval is called after each evaluation that Options.EvalEverySteps
	// asks for, with the metrics on the test (validation) set.
	OnEval func(step int, m Metrics)
	// OnCheckpoint is called after a checkpoint is written (PE 0 wrote it;
	// every PE is told).
	OnCheckpoint func(path string, step int)
	// OnWarning is called with problems the run survives (for example a
	// corrupt checkpoint skipped for the previous one, a periodic
	// checkpoint that could not be written). Nil: PE 0 writes them to
	// standard error ("ddp: warning: ...").
	OnWarning func(msg string)
}

// StartInfo describes a run at its start.
type StartInfo struct {
	PE, NPEs      int    // this PE and the job's size
	Params        int    // parameter count
	StepsPerEpoch int    // optimizer steps in one pass over the training set
	TotalSteps    int    // steps Fit will run, counting resumed ones
	MicroBatch    int    // rows of one forward on one PE
	StartStep     int    // > 0 when resumed
	Resumed       string // the checkpoint resumed from; "" for a fresh start
	InitFrom      string // the file Options.InitFrom's weights came from (Trainer.InitSource); "" without
	Engine        string // the compute engine's name ("cpu/openblas")
	Backend       string // the comm backend's name ("shm")
	ShardedUpdate bool   // each PE updates its shard of the parameters (ZeRO-1)
	Strategy      string // the gradient-sync strategy: replicated, sharded or device
	Tokens        int    // tokens per sample for token models (context), 0 otherwise
	// Reduction says how the gradients are reduced across the PEs ("" with
	// one PE): in buckets during backward, and their size, or once after it
	// and why
	Reduction string
}

// StepInfo describes one finished optimizer step.
type StepInfo struct {
	Step        int     // optimizer steps done in total, from 1
	Epoch       int     // from 0
	StepInEpoch int     // from 0
	LR          float32 // the learning rate the step used
	Skipped     bool    // a non-finite step skipped under SkipNonFinite
}

// LogInfo carries the training metrics of the steps since the last log,
// averaged over every labelled sample of every PE.
type LogInfo struct {
	Step          int           // optimizer steps done
	Epoch         int           // the epoch of the last step, from 0
	Loss          float64       // mean cross-entropy per labelled sample
	Accuracy      float64       // fraction of samples whose arg-max logit is the label
	SamplesPerSec float64       // global samples per second over the window
	TokensPerSec  float64       // global tokens per second (token models; 0 otherwise)
	Elapsed       time.Duration // since Fit started
	LR            float32       // the learning rate of the last step
}

// EpochInfo describes a finished epoch.
type EpochInfo struct {
	Epoch     int           // the epoch that ended, from 0
	Step      int           // optimizer steps done
	Elapsed   time.Duration // since Fit started
	Evaluated bool          // Test holds metrics (Options.EvalEvery)
	Test      Metrics       // on the test set, when Evaluated
}

// Metrics are a loss and an accuracy over a set of labelled samples.
type Metrics struct {
	Loss     float64 // mean cross-entropy per target (sample, or token of a token model)
	Accuracy float64 // fraction of targets predicted right
	Samples  int     // targets counted (labelled samples, or tokens), over all PEs
}

// Result is what Fit returns.
type Result struct {
	Steps         int           // optimizer steps done in total, resumed ones included
	Epochs        int           // complete epochs done
	Samples       int64         // training samples processed in this run (not resumed ones)
	Elapsed       time.Duration // of this run
	SamplesPerSec float64       // Samples / Elapsed, over all PEs
	Test          Metrics       // on the test set at the end (zero without one, or when stopped)
	Train         LogInfo       // the last window of training metrics
	Replicas      ReplicaReport // the final replica check
	Stopped       bool          // stopped early by a signal (context cancelled)
	// DeviceBytes is each PE's device memory held by its engine at the end
	// (activations, optimizer state, workspaces; the arenas in the
	// symmetric heap not included), in PE order; nil for host engines.
	DeviceBytes []int64
	// DeviceWait is how long this PE's host blocked on the device inside
	// its steps on the device step path (for a free pipeline slot, for a
	// step's report): Elapsed less DeviceWait is the host's own share of
	// the run. Near Elapsed, the device bounds the steps; near zero, the
	// host (the data pipeline, the launches) does. Zero on host engines.
	DeviceWait time.Duration
}
