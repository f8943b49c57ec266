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
	// OnCheckpoint is called after a checkpoint is written (PE 0 wrote it;
	// every PE is told).
	OnCheckpoint func(path string, step int)
	// OnWarning is called with problems the run survives (for example a
	// corrupt checkpoint skipped for the previous one).
	OnWarning func(msg string)
}

// StartInfo describes a run at its start.
type StartInfo struct {
	PE, NPEs      int
	Params        int // parameter count
	StepsPerEpoch int
	TotalSteps    int // steps Fit will run, counting resumed ones
	MicroBatch    int // rows of one forward on one PE
	StartStep     int // > 0 when resumed
	Resumed       string
	Engine        string
	Backend       string
}

// StepInfo describes one finished optimizer step.
type StepInfo struct {
	Step        int // optimizer steps done in total, from 1
	Epoch       int // from 0
	StepInEpoch int // from 0
	LR          float32
	Skipped     bool // a non-finite step skipped under SkipNonFinite
}

// LogInfo carries the training metrics of the steps since the last log,
// averaged over every labelled sample of every PE.
type LogInfo struct {
	Step          int
	Epoch         int
	Loss          float64
	Accuracy      float64
	SamplesPerSec float64 // global samples per second over the window
	Elapsed       time.Duration
	LR            float32
}

// EpochInfo describes a finished epoch.
type EpochInfo struct {
	Epoch     int
	Step      int
	Elapsed   time.Duration
	Evaluated bool
	Test      Metrics
}

// Metrics are a loss and an accuracy over a set of labelled samples.
type Metrics struct {
	Loss     float64
	Accuracy float64
	Samples  int
}

// Result is what Fit returns.
type Result struct {
	Steps         int
	Epochs        int
	Samples       int64 // training samples processed in this run (not resumed ones)
	Elapsed       time.Duration
	SamplesPerSec float64
	Test          Metrics
	Train         LogInfo // the last window of training metrics
	Replicas      ReplicaReport
	Stopped       bool // stopped early by a signal (context cancelled)
}
