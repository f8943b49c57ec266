package optim

import (
	"fmt"
	"testing"
)

func TestNames(t *testing.T) {
	if got := fmt.Sprint(Names()); got != "[adam adamw sgd]" {
		t.Errorf("Names() = %s", got)
	}
}

func TestNewUnknown(t *testing.T) {
	o, err := New("adagrad", Config{})
	wantErr(t, err, `unknown optimizer "adagrad"`, "known: adam, adamw, sgd")
	if o != nil {
		t.Errorf("New returned %v with its error", o)
	}
	_, err = DefaultConfig("SGD")
	wantErr(t, err, `unknown optimizer "SGD"`)
}

func TestDefaultConfig(t *testing.T) {
	want := map[string]Config{
		"sgd":   {},
		"adam":  {Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		"adamw": {Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01},
	}
	for _, name := range Names() {
		c, err := DefaultConfig(name)
		if err != nil || c != want[name] {
			t.Errorf("DefaultConfig(%q) = %+v, %v, want %+v", name, c, err, want[name])
		}
		o, err := New(name, c)
		if err != nil {
			t.Fatalf("New(%q, defaults): %v", name, err)
		}
		if o.Name() != name || o.Hyper() != (Hyper{Kind: name, Config: c}) {
			t.Errorf("New(%q, defaults) is %q with %+v", name, o.Name(), o.Hyper())
		}
	}
}

func TestNewIgnoresOtherFields(t *testing.T) {
	// A flat command-line config: SGD ignores the betas and eps, Adam the
	// momentum.
	c := Config{Momentum: 0.9, Nesterov: true, WeightDecay: 0.1, Beta1: 0.8, Beta2: 0.9, Eps: 1e-6}
	o, err := New("sgd", c)
	if err != nil {
		t.Fatal(err)
	}
	if h := o.Hyper(); h != (Hyper{Kind: "sgd", Config: Config{Momentum: 0.9, Nesterov: true, WeightDecay: 0.1}}) {
		t.Errorf("sgd Hyper() = %+v", h)
	}
	o, err = New("adam", c)
	if err != nil {
		t.Fatal(err)
	}
	if h := o.Hyper(); h != (Hyper{Kind: "adam", Config: Config{WeightDecay: 0.1, Beta1: 0.8, Beta2: 0.9, Eps: 1e-6}}) {
		t.Errorf("adam Hyper() = %+v", h)
	}
}

func TestNewReportsInvalid(t *testing.T) {
	_, err := New("sgd", Config{Nesterov: true})
	wantErr(t, err, "nesterov needs momentum")
	_, err = New("adamw", Config{Beta1: 0.9, Beta2: 0.999})
	wantErr(t, err, "adamw", "eps")
	// The error is a nil interface, not a typed nil.
	if o, _ := New("adam", Config{}); o != nil {
		t.Errorf("New returned a non-nil Optimizer %#v with its error", o)
	}
}
