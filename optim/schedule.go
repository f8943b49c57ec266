package optim

import (
	"fmt"
	"math"
	"strings"
)

// Schedules are computed in float64 from their float32 settings and rounded
// to float32 once, so every PE gets the same learning rate.

// constant is the schedule of NewConstant.
type constant struct{ lr float32 }

// NewConstant returns the schedule LR(step) = lr.
func NewConstant(lr float32) (Schedule, error) {
	if err := nonNegative("constant schedule", "lr", lr); err != nil {
		return nil, err
	}
	return constant{lr}, nil
}

// LR returns the constant learning rate.
func (s constant) LR(step int) float32 {
	checkStep(step)
	return s.lr
}

// stepDecay is the schedule of NewStepDecay.
type stepDecay struct {
	lr, gamma float32
	stepSize  int
}

// NewStepDecay returns the schedule that multiplies lr by gamma every
// stepSize steps, as torch.optim.lr_scheduler.StepLR:
//
//	LR(step) = float32(lr · gamma^⌊(step−1)/stepSize⌋)
//
// so steps 1 … stepSize run at lr. It needs lr ≥ 0, stepSize ≥ 1 and gamma in
// (0, 1].
func NewStepDecay(lr float32, stepSize int, gamma float32) (Schedule, error) {
	if err := nonNegative("step schedule", "lr", lr); err != nil {
		return nil, err
	}
	if stepSize < 1 {
		return nil, fmt.Errorf("optim: step schedule: step size must be >= 1, got %d", stepSize)
	}
	if !(gamma > 0 && gamma <= 1) {
		return nil, fmt.Errorf("optim: step schedule: gamma must be in (0, 1], got %g", gamma)
	}
	return stepDecay{lr: lr, gamma: gamma, stepSize: stepSize}, nil
}

// LR returns the decayed learning rate.
func (s stepDecay) LR(step int) float32 {
	checkStep(step)
	k := (step - 1) / s.stepSize
	return float32(float64(s.lr) * math.Pow(float64(s.gamma), float64(k)))
}

// cosine is the schedule of NewCosine.
type cosine struct {
	lr, minLR float32
	total     int
}

// NewCosine returns the cosine annealing schedule from lr down to minLR over
// total steps (Loshchilov and Hutter, 2017, "SGDR: Stochastic Gradient
// Descent with Warm Restarts", arXiv:1608.03983, without restarts), as
// torch.optim.lr_scheduler.CosineAnnealingLR with T_max = total:
//
//	LR(step) = float32(minLR + (lr − minLR)·(1 + cos(π·t/total))/2),  t = min(step−1, total)
//
// so LR(1) = lr and LR(step) = minLR from step total+1 on (where PyTorch's
// would rise again). It needs 0 ≤ minLR ≤ lr and total ≥ 1.
func NewCosine(lr, minLR float32, total int) (Schedule, error) {
	if err := firstErr(nonNegative("cosine schedule", "lr", lr),
		nonNegative("cosine schedule", "min lr", minLR)); err != nil {
		return nil, err
	}
	if minLR > lr {
		return nil, fmt.Errorf("optim: cosine schedule: min lr %g is above lr %g", minLR, lr)
	}
	if total < 1 {
		return nil, fmt.Errorf("optim: cosine schedule: total steps must be >= 1, got %d", total)
	}
	return cosine{lr: lr, minLR: minLR, total: total}, nil
}

// LR returns the annealed learning rate.
func (s cosine) LR(step int) float32 {
	checkStep(step)
	t := min(step-1, s.total)
	lo, hi := float64(s.minLR), float64(s.lr)
	return float32(lo + (hi-lo)*(1+math.Cos(math.Pi*float64(t)/float64(s.total)))/2)
}

// Settled is total + 1: the step from which the rate is minLR.
func (s cosine) Settled() int { return s.total + 1 }

// warmup is the schedule of NewWarmup.
type warmup struct {
	steps int
	then  Schedule
}

// NewWarmup returns a linear warmup of steps steps before the schedule then
// (Goyal et al., 2017, "Accurate, Large Minibatch SGD: Training ImageNet in
// 1 Hour", arXiv:1706.02677). The learning rate rises linearly to then's
// first one, and then runs with its steps counted from the end of the warmup:
//
//	LR(step) = float32(then.LR(1) · step / steps)   step ≤ steps
//	LR(step) = then.LR(step − steps)                step > steps
//
// It needs steps ≥ 0; 0 returns then itself.
func NewWarmup(steps int, then Schedule) (Schedule, error) {
	if steps < 0 {
		return nil, fmt.Errorf("optim: warmup: steps must be >= 0, got %d", steps)
	}
	if then == nil {
		return nil, fmt.Errorf("optim: warmup: no schedule to warm up to")
	}
	if steps == 0 {
		return then, nil
	}
	return warmup{steps: steps, then: then}, nil
}

// LR returns the warmed-up learning rate.
func (s warmup) LR(step int) float32 {
	checkStep(step)
	if step > s.steps {
		return s.then.LR(step - s.steps)
	}
	return float32(float64(s.then.LR(1)) * float64(step) / float64(s.steps))
}

// Settled is the warmup's steps plus the first settled step of the
// schedule after it, or 0 when that one does not settle.
func (s warmup) Settled() int {
	if t, ok := s.then.(Settling); ok && t.Settled() > 0 {
		return s.steps + t.Settled()
	}
	return 0
}

// checkStep panics unless step ≥ 1.
func checkStep(step int) {
	if step < 1 {
		panic(fmt.Sprintf("optim: schedule step %d, steps count from 1", step))
	}
}

// ScheduleConfig holds the settings of every schedule, flat, as the command
// line sets them. Each schedule reads the fields it uses and ignores the
// others.
type ScheduleConfig struct {
	// LR ≥ 0 is the base (peak) learning rate.
	LR float32
	// Warmup ≥ 0 is the number of linear warmup steps before the schedule
	// (all schedules; 0: none).
	Warmup int
	// Total is the number of training steps, warmup included (cosine).
	Total int
	// StepSize ≥ 1 is the number of steps between decays (step).
	StepSize int
	// Gamma in (0, 1] is the decay factor (step).
	Gamma float32
	// MinLR in [0, LR] is the final learning rate (cosine).
	MinLR float32
}

// scheduleNames are the names NewSchedule knows, sorted.
var scheduleNames = []string{"constant", "cosine", "step"}

// ScheduleNames returns the schedule names NewSchedule knows, sorted.
func ScheduleNames() []string { return append([]string(nil), scheduleNames...) }

// NewSchedule returns the schedule called name, built from c and preceded by
// c.Warmup warmup steps:
//
//	"constant"  NewConstant(c.LR)
//	"step"      NewStepDecay(c.LR, c.StepSize, c.Gamma)
//	"cosine"    NewCosine(c.LR, c.MinLR, c.Total − c.Warmup), so that it
//	            reaches MinLR after c.Total steps in all
//
// It reports an unknown name, listing the known ones, and invalid settings.
func NewSchedule(name string, c ScheduleConfig) (Schedule, error) {
	if c.Warmup < 0 {
		return nil, fmt.Errorf("optim: warmup: steps must be >= 0, got %d", c.Warmup)
	}
	var s Schedule
	var err error
	switch name {
	case "constant":
		s, err = NewConstant(c.LR)
	case "step":
		s, err = NewStepDecay(c.LR, c.StepSize, c.Gamma)
	case "cosine":
		if c.Total <= c.Warmup {
			return nil, fmt.Errorf("optim: cosine schedule: total steps %d must be above warmup steps %d", c.Total, c.Warmup)
		}
		s, err = NewCosine(c.LR, c.MinLR, c.Total-c.Warmup)
	default:
		return nil, fmt.Errorf("optim: unknown schedule %q (known: %s)", name, strings.Join(scheduleNames, ", "))
	}
	if err != nil {
		return nil, err
	}
	return NewWarmup(c.Warmup, s)
}
