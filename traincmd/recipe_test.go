package traincmd

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/symddp/symddp/models"
	"github.com/symddp/symddp/optim"
)

// resolved parses args as train does and returns the resolved recipe.
func resolved(t *testing.T, args ...string) recipe {
	t.Helper()
	o, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("train %s: %v", strings.Join(args, " "), err)
	}
	if err := o.validate(); err != nil {
		t.Fatalf("train %s: %v", strings.Join(args, " "), err)
	}
	return o.recipe
}

// TestLanguageModelRecipe: each language-model default is what the run
// uses, read from the resolved recipe (not from the flag variables): AdamW
// with betas 0.9 and 0.95, weight decay 0.1, lr 1e-3, 20 warm-up steps then
// cosine over 400 steps, clipping at 1, 16 sequences a step.
func TestLanguageModelRecipe(t *testing.T) {
	rc := resolved(t, "--pes", "2", "--model", "gpt-tiny")
	want := recipe{Optimizer: "adamw", Hyper: optim.Config{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1},
		LR: 1e-3, Schedule: "cosine", Warmup: 20, WarmupDefault: true, StepSize: 1000, Gamma: 0.1, ClipNorm: 1, Batch: 16, Accum: 1,
		Epochs: 5, MaxSteps: 400, Recompute: models.RecomputeNone}
	if rc != want {
		t.Errorf("gpt-tiny's recipe\n got %+v\nwant %+v", rc, want)
	}
	// a short run warms up for a tenth of it; a typed warm-up stays
	if rc := resolved(t, "--model", "gpt-tiny", "--max-steps", "60").forRun(60); rc.Warmup != 6 || rc.MaxSteps != 60 {
		t.Errorf("--max-steps 60: warm-up %d over %d steps, want 6 over 60", rc.Warmup, rc.MaxSteps)
	}
	if rc := resolved(t, "--model", "gpt-tiny", "--warmup-steps", "20").forRun(60); rc.Warmup != 20 {
		t.Errorf("--warmup-steps 20 over 60 steps: warm-up %d, want 20", rc.Warmup)
	}
	// what the user types wins over the model's default
	rc = resolved(t, "--model", "gpt-tiny", "--beta2", "0.999", "--weight-decay", "0.01", "--clip-norm", "0", "--lr", "3e-4")
	if h := rc.Hyper; h.Beta2 != 0.999 || h.WeightDecay != 0.01 || rc.ClipNorm != 0 || rc.LR != 3e-4 {
		t.Errorf("typed flags: %+v, want beta2 0.999, weight decay 0.01, no clipping, lr 3e-4", rc)
	}
	// another optimizer keeps its own defaults, not AdamW's recipe
	rc = resolved(t, "--model", "gpt-tiny", "--optimizer", "adam")
	if h := rc.Hyper; h.Beta2 != 0.999 || h.WeightDecay != 0 || rc.LR != 1e-3 {
		t.Errorf("gpt-tiny with adam: %+v, want Adam's defaults (beta2 0.999, no weight decay, lr 1e-3)", rc)
	}
	rc = resolved(t, "--model", "gpt-tiny", "--optimizer", "sgd")
	if h := rc.Hyper; h.Momentum != 0.9 || h.WeightDecay != 0 || rc.LR != 0.05 {
		t.Errorf("gpt-tiny with sgd: %+v, want momentum 0.9, no weight decay, lr 0.05", rc)
	}
}

// TestClassifierRecipe: the mlp's recipe is train's SGD, and AdamW without
// a language model has the optimizer's own weight decay (0.01).
func TestClassifierRecipe(t *testing.T) {
	rc := resolved(t, "--pes", "4")
	want := recipe{Optimizer: "sgd", Hyper: optim.Config{Momentum: 0.9}, LR: 0.05, Schedule: "cosine",
		StepSize: 1000, Gamma: 0.1, Batch: 256, Accum: 1, Epochs: 5, Recompute: models.RecomputeNone}
	if rc != want {
		t.Errorf("mlp's recipe\n got %+v\nwant %+v", rc, want)
	}
	rc = resolved(t, "--optimizer", "adamw")
	if h := rc.Hyper; h.Beta1 != 0.9 || h.Beta2 != 0.999 || h.Eps != 1e-8 || h.WeightDecay != 0.01 || rc.LR != 1e-3 {
		t.Errorf("mlp with adamw: %+v, want PyTorch's AdamW defaults and lr 1e-3", rc)
	}
}

// ownDefaults is an mlp with training defaults of its own
// (models.Defaulter), as a library user's model may have.
type ownDefaults struct{ models.Model }

func (ownDefaults) TrainingDefaults() models.TrainingDefaults {
	return models.TrainingDefaults{Batch: 64, Optimizer: "adamw", WeightDecay: 0.05, Beta2: 0.98, ClipNorm: 0.5}
}

// TestModelDefaultsRecipe: a registered model that states its own training
// defaults gets them in the resolved recipe, the typed flags still win, and
// the precision check asks the model (models.PrecisionSetter), not its type.
func TestModelDefaultsRecipe(t *testing.T) {
	models.Register("mlp-own-defaults", func(cfg models.Config) (models.Model, error) {
		m, err := models.New("mlp", cfg)
		return ownDefaults{m}, err
	})
	rc := resolved(t, "--model", "mlp-own-defaults")
	if h := rc.Hyper; rc.Optimizer != "adamw" || h.WeightDecay != 0.05 || h.Beta2 != 0.98 || rc.ClipNorm != 0.5 || rc.Batch != 64 {
		t.Errorf("the model's own defaults: %+v, want adamw, weight decay 0.05, beta2 0.98, clipping at 0.5, batch 64", rc)
	}
	rc = resolved(t, "--model", "mlp-own-defaults", "--beta2", "0.9", "--batch-size", "32")
	if rc.Hyper.Beta2 != 0.9 || rc.Batch != 32 || rc.Hyper.WeightDecay != 0.05 {
		t.Errorf("typed flags over the model's defaults: %+v, want beta2 0.9, batch 32, weight decay 0.05", rc)
	}
	// the optimizer's hyperparameters belong to the model's optimizer only
	if rc := resolved(t, "--model", "mlp-own-defaults", "--optimizer", "adam"); rc.Hyper.Beta2 != 0.999 || rc.Hyper.WeightDecay != 0 {
		t.Errorf("with adam: %+v, want Adam's own beta2 0.999 and no weight decay", rc)
	}
	o, err := parseFlags([]string{"--model", "mlp-own-defaults", "--backend", "nvshmem", "--precision", "bf16"}, io.Discard)
	if err == nil {
		err = o.validate()
	}
	if err == nil || !strings.Contains(err.Error(), "trains in fp32") {
		t.Errorf("--precision bf16 for a model that does not choose its precision: %v, want a usage error saying it trains in fp32", err)
	}
}

// TestRecipeContradictions: values out of range and flags that the chosen
// optimizer or schedule would ignore are usage errors, reported by the
// launcher before any PE starts (one line, exit 2).
func TestRecipeContradictions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lr", "0"}, "--lr 0: must be positive (leave it out for the default"},
		{[]string{"--beta2", "0.95"}, "--beta2 applies to adam and adamw, not to --optimizer sgd"},
		{[]string{"--eps", "1e-6"}, "--eps applies to adam and adamw, not to --optimizer sgd"},
		{[]string{"--optimizer", "adam", "--momentum", "0.8"}, "--momentum applies to sgd, not to --optimizer adam"},
		{[]string{"--model", "gpt-tiny", "--nesterov"}, "--nesterov applies to sgd, not to --optimizer adamw"},
		{[]string{"--optimizer", "adam", "--beta2", "1.5"}, "--beta2 1.5: must be in [0, 1)"},
		{[]string{"--optimizer", "adamw", "--beta1", "-0.1"}, "--beta1 -0.1: must be in [0, 1)"},
		{[]string{"--optimizer", "adamw", "--eps", "0"}, "--eps 0: must be positive"},
		{[]string{"--weight-decay", "-1"}, "--weight-decay -1: must not be negative"},
		{[]string{"--clip-norm", "-1"}, "--clip-norm -1: must not be negative"},
		{[]string{"--schedule", "step", "--min-lr", "0.01"}, "--min-lr applies to --schedule cosine, not step"},
		{[]string{"--gamma", "0.5"}, "--gamma applies to --schedule step, not cosine"},
		{[]string{"--min-lr", "1"}, "--min-lr 1: must be in [0, --lr 0.05]"},
		{[]string{"--schedule", "step", "--gamma", "2"}, "--gamma 2: must be in (0, 1]"},
		{[]string{"--warmup-steps", "-3"}, "--warmup-steps -3: must not be negative"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != 2 || !strings.Contains(lines[0], tc.want) || len(lines) != 2 || stdout.Len() != 0 {
			t.Errorf("train %s: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q (and the --help pointer)",
				strings.Join(tc.args, " "), code, stdout.String(), stderr.String(), tc.want)
		}
	}
}

// TestRecipeDescribe: the header's recipe line names every hyperparameter
// the run uses and what weight decay exempts.
func TestRecipeDescribe(t *testing.T) {
	rc := resolved(t, "--pes", "2", "--model", "gpt-tiny", "--accumulate", "2")
	m, err := models.New("gpt-tiny", models.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := rc.describe(m.Params(), 400, 2)
	for _, want := range []string{"adamw (betas 0.9, 0.95, eps 1e-08, weight decay 0.1 decoupled on 18 of 52 tensors; exempt: 34 tensors, 6912 parameters (h.0.ln_1.weight, ",
		"lr 0.001 after 20 steps of linear warm-up, cosine to 0 at step 400, gradient norm clipped at 1",
		"global batch 16 = 2 PEs x 4 x 2 micro-batches (accumulated)"} {
		if !strings.Contains(got, want) {
			t.Errorf("recipe line %q lacks %q", got, want)
		}
	}
	rec := rc.record(400, dataChoice{name: "synthetic"})
	if rec["beta2"] != float32(0.95) || rec["weight_decay"] != float32(0.1) || rec["warmup_steps"] != 20 || rec["total_steps"] != 400 || rec["data"] != "synthetic" {
		t.Errorf("checkpoint record %v", rec)
	}
}
