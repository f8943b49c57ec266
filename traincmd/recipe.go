package traincmd

import (
	"fmt"
	"math"
	"strings"

	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// recipe is the run's training recipe: every hyperparameter of the
// optimizer, the schedule, clipping and the batch, resolved once (resolve)
// from what the user typed, the model's defaults (a language model's,
// modelDefaults) and the optimizer's own defaults, in that order.
// Everything that builds the run or prints it reads this, never the flag
// variables, so a default cannot be applied in one place and lost in
// another.
type recipe struct {
	Optimizer string       // registry name (optim.Names)
	Hyper     optim.Config // what optim.New gets
	LR        float32      // base (peak) learning rate
	Schedule  string       // optim.ScheduleNames
	Warmup    int          // linear warm-up steps
	// WarmupDefault says Warmup is the model's default (not --warmup-steps),
	// which a run shorter than ten times it cuts to a tenth (forRun).
	WarmupDefault bool
	MinLR         float32 // cosine's final learning rate
	StepSize      int     // step schedule: steps between decays
	Gamma         float32 // step schedule: decay factor
	ClipNorm      float32 // 0: no clipping
	Batch         int     // global batch (all PEs, all micro-batches)
	Accum         int     // micro-batches per optimizer step
	Epochs        int     // passes over the training set (MaxSteps may cut them short)
	MaxSteps      int     // 0: no limit
	// Recompute is the activations a transformer recomputes in backward
	// (--recompute): not the trained bits, which every mode keeps, but the
	// memory and arithmetic of a step, which a checkpoint records as well.
	Recompute models.Recompute
}

// optimizerUses says which optimizers read a hyperparameter flag: setting
// it for another optimizer is a usage error rather than silently ignored.
var optimizerUses = []struct {
	flag  string
	kinds []string
}{
	{"momentum", []string{"sgd"}},
	{"nesterov", []string{"sgd"}},
	{"beta1", []string{"adam", "adamw"}},
	{"beta2", []string{"adam", "adamw"}},
	{"eps", []string{"adam", "adamw"}},
}

// scheduleUses is the same for the schedules' flags.
var scheduleUses = []struct {
	flag  string
	kinds []string
}{
	{"step-size", []string{"step"}},
	{"gamma", []string{"step"}},
	{"min-lr", []string{"cosine"}},
}

// resolve makes the recipe from the flags; it is called once the flags
// parsed (and the language-model defaults are in o), before any PE starts,
// and reports contradictions and out-of-range values as usage errors.
func (o *options) resolve() (recipe, error) {
	rc := recipe{Optimizer: o.optimizer, Schedule: o.schedule, Warmup: o.warmup, StepSize: o.stepSize,
		Gamma: o.gamma, MinLR: o.minLR, ClipNorm: o.clipNorm, Batch: o.batch, Accum: o.accumulate,
		Epochs: o.epochs, MaxSteps: o.maxSteps, WarmupDefault: o.modelDefault["warmup-steps"]}
	r, err := models.ParseRecompute(o.recompute)
	if err != nil {
		return recipe{}, usagef("--recompute %q: want none, gelu or block", o.recompute)
	}
	rc.Recompute = r
	for _, u := range optimizerUses {
		if o.set(u.flag) && !contains(u.kinds, o.optimizer) {
			return recipe{}, usagef("--%s applies to %s, not to --optimizer %s", u.flag, strings.Join(u.kinds, " and "), o.optimizer)
		}
	}
	for _, u := range scheduleUses {
		if o.set(u.flag) && !contains(u.kinds, o.schedule) {
			return recipe{}, usagef("--%s applies to --schedule %s, not %s", u.flag, strings.Join(u.kinds, " and "), o.schedule)
		}
	}
	c, err := optim.DefaultConfig(o.optimizer)
	if err != nil {
		return recipe{}, usagef("--optimizer %q: want one of %s", o.optimizer, strings.Join(optim.Names(), ", "))
	}
	// the user's value, else the model's default (o.modelDefault), else the
	// optimizer's own (c as it came)
	given := func(flag string) bool { return o.set(flag) || o.modelDefault[flag] }
	switch o.optimizer {
	case "sgd":
		c.Momentum, c.Nesterov = o.momentum, o.nesterov // train's SGD: momentum 0.9 unless told
	default:
		if given("beta1") {
			c.Beta1 = o.beta1
		}
		if given("beta2") {
			c.Beta2 = o.beta2
		}
		if given("eps") {
			c.Eps = o.eps
		}
	}
	if given("weight-decay") {
		c.WeightDecay = o.weightDecay
	}
	rc.Hyper = c
	switch {
	case c.Beta1 < 0 || c.Beta1 >= 1 || isNaN32(c.Beta1):
		return recipe{}, usagef("--beta1 %g: must be in [0, 1)", c.Beta1)
	case c.Beta2 < 0 || c.Beta2 >= 1 || isNaN32(c.Beta2):
		return recipe{}, usagef("--beta2 %g: must be in [0, 1)", c.Beta2)
	case o.optimizer != "sgd" && !(c.Eps > 0):
		return recipe{}, usagef("--eps %g: must be positive", c.Eps)
	case c.WeightDecay < 0 || isNaN32(c.WeightDecay):
		return recipe{}, usagef("--weight-decay %g: must not be negative", c.WeightDecay)
	}
	if _, err := optim.New(rc.Optimizer, rc.Hyper); err != nil {
		return recipe{}, usageError{err: err}
	}

	switch {
	case o.set("lr") && !(o.lr > 0):
		return recipe{}, usagef("--lr %g: must be positive (leave it out for the default: 0.05 for sgd, 0.001 for adam and adamw)", o.lr)
	case o.set("lr"):
		rc.LR = o.lr
	case o.optimizer == "sgd":
		rc.LR = 0.05
	default:
		rc.LR = 1e-3
	}
	switch {
	case rc.MinLR < 0 || rc.MinLR > rc.LR || isNaN32(rc.MinLR):
		return recipe{}, usagef("--min-lr %g: must be in [0, --lr %g]", rc.MinLR, rc.LR)
	case rc.StepSize < 1:
		return recipe{}, usagef("--step-size %d: must be at least 1", rc.StepSize)
	case !(rc.Gamma > 0 && rc.Gamma <= 1):
		return recipe{}, usagef("--gamma %g: must be in (0, 1]", rc.Gamma)
	case rc.Warmup < 0:
		return recipe{}, usagef("--warmup-steps %d: must not be negative", rc.Warmup)
	case !(rc.ClipNorm >= 0):
		return recipe{}, usagef("--clip-norm %g: must not be negative", rc.ClipNorm)
	}
	if _, err := rc.schedule(max(rc.MaxSteps, rc.Warmup+1)); err != nil {
		return recipe{}, usageError{err: err}
	}
	return rc, nil
}

func isNaN32(f float32) bool { return math.IsNaN(float64(f)) }

// forRun is the recipe of a run of total steps: the model's default
// warm-up is at most a tenth of it, so that a run made short by --max-steps,
// --epochs or a small corpus still warms up for a part of it only.
func (rc recipe) forRun(total int) recipe {
	if rc.WarmupDefault {
		rc.Warmup = min(rc.Warmup, total/10)
	}
	return rc
}

// schedule is the recipe's learning-rate schedule over total steps.
func (rc recipe) schedule(total int) (optim.Schedule, error) {
	return optim.NewSchedule(rc.Schedule, optim.ScheduleConfig{LR: rc.LR, Warmup: rc.Warmup, Total: total,
		StepSize: rc.StepSize, Gamma: rc.Gamma, MinLR: rc.MinLR})
}

// describe is the recipe in one line for the start-up header: the
// optimizer and every hyperparameter it uses, which parameters weight decay
// exempts (from the model's ParamSpec.NoDecay), the schedule over the run's
// total steps, clipping and how the global batch splits.
func (rc recipe) describe(specs []models.ParamSpec, total, pes int) string {
	h := rc.Hyper
	var b strings.Builder
	b.WriteString(rc.Optimizer)
	switch rc.Optimizer {
	case "sgd":
		fmt.Fprintf(&b, " (momentum %g", h.Momentum)
		if h.Nesterov {
			b.WriteString(", Nesterov")
		}
	default:
		fmt.Fprintf(&b, " (betas %g, %g, eps %g", h.Beta1, h.Beta2, h.Eps)
	}
	kind := "L2"
	if rc.Optimizer == "adamw" {
		kind = "decoupled"
	}
	if h.WeightDecay == 0 {
		b.WriteString(", no weight decay)")
	} else {
		fmt.Fprintf(&b, ", weight decay %g %s%s)", h.WeightDecay, kind, exemptNote(specs))
	}
	fmt.Fprintf(&b, ", lr %g", rc.LR)
	if rc.Warmup > 0 {
		fmt.Fprintf(&b, " after %s of linear warm-up", plural(rc.Warmup, "step"))
	}
	switch rc.Schedule {
	case "cosine":
		fmt.Fprintf(&b, ", cosine to %g at step %d", rc.MinLR, total)
	case "step":
		fmt.Fprintf(&b, ", times %g every %s", rc.Gamma, plural(rc.StepSize, "step"))
	default:
		fmt.Fprintf(&b, ", %s", rc.Schedule)
	}
	if rc.ClipNorm > 0 {
		fmt.Fprintf(&b, ", gradient norm clipped at %g", rc.ClipNorm)
	} else {
		b.WriteString(", no clipping")
	}
	micro := rc.Batch / max(1, pes*rc.Accum)
	fmt.Fprintf(&b, ", global batch %d = %s x %d", rc.Batch, plural(pes, "PE"), micro)
	if rc.Accum > 1 {
		fmt.Fprintf(&b, " x %d micro-batches (accumulated)", rc.Accum)
	}
	return b.String()
}

// exemptNote says which parameters weight decay leaves alone: " on every
// parameter", or " on N of M tensors; exempt: the rest's kinds".
func exemptNote(specs []models.ParamSpec) string {
	var exempt []string
	n := 0
	for _, s := range specs {
		if s.NoDecay {
			exempt = append(exempt, s.Name)
			n += s.Size()
		}
	}
	if len(exempt) == 0 {
		return " on every parameter"
	}
	names := exempt
	if len(names) > 3 {
		names = append(names[:3:3], "...")
	}
	return fmt.Sprintf(" on %d of %d tensors; exempt: %d tensors, %d parameters (%s)",
		len(specs)-len(exempt), len(specs), len(exempt), n, strings.Join(names, ", "))
}

// record is the recipe as the checkpoint's metadata keeps it
// (ddp.Options.Recipe), with the data the run trains on (dataChoice.record).
func (rc recipe) record(total int, dc dataChoice) map[string]any {
	return map[string]any{"data": dc.record(), "optimizer": rc.Optimizer, "momentum": rc.Hyper.Momentum, "nesterov": rc.Hyper.Nesterov,
		"beta1": rc.Hyper.Beta1, "beta2": rc.Hyper.Beta2, "eps": rc.Hyper.Eps, "weight_decay": rc.Hyper.WeightDecay,
		"lr": rc.LR, "schedule": rc.Schedule, "warmup_steps": rc.Warmup, "min_lr": rc.MinLR, "step_size": rc.StepSize,
		"gamma": rc.Gamma, "clip_norm": rc.ClipNorm, "global_batch": rc.Batch, "accumulate": rc.Accum,
		"epochs": rc.Epochs, "max_steps": rc.MaxSteps, "total_steps": total, "recompute": string(rc.Recompute)}
}
