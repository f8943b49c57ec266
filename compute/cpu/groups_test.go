package cpu

import (
	"testing"

	"github.com/symddp/symddp/compute"
	"github.com/symddp/symddp/compute/blas"
	"github.com/symddp/symddp/compute/computetest"
)

// The transformer's operation groups, on every BLAS.
func TestGroupsConformance(t *testing.T) {
	for name, e := range engines(t) {
		t.Run(name, func(t *testing.T) { computetest.RunGroups(t, e) })
	}
}

// An engine without the groups (here the CPU engine behind a plain
// compute.Engine) passes RunGroups by skipping each group, and Require names
// what it lacks.
func TestGroupsSkipWhatIsMissing(t *testing.T) {
	e, err := New(Options{BLAS: blas.Gonum, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	plain := struct{ compute.Engine }{e}
	computetest.RunGroups(t, plain)
	_, err = compute.Require[compute.Attention](plain, "causal attention")
	if err == nil || err.Error() != "engine cpu/gonum has no causal attention (compute.Attention)" {
		t.Errorf("Require on an engine without Attention: %v", err)
	}
	if _, err := compute.Require[compute.Attention](e, "causal attention"); err != nil {
		t.Errorf("Require on the CPU engine: %v", err)
	}
}
