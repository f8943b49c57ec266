//go:build mpi

package mpi

import (
	"testing"

	"github.com/symddp/symddp/comm"
)

// TestHierConfig: every spelling the docs give switches hierarchical mode
// on or off, and any other value is an error that names where it came from
// (the variable, or the Config option) and lists what it takes.
func TestHierConfig(t *testing.T) {
	const values = "want 1, on or true (hierarchical allreduce) or 0, off or false (flat, the default)"
	for v, want := range map[string]bool{"": false, "0": false, "off": false, "false": false, "1": true, "on": true, "true": true} {
		t.Setenv(EnvHierarchical, v)
		if on, _, err := hierConfig(comm.Config{}); on != want || err != nil {
			t.Errorf("%s=%q: on %v, err %v; want on %v", EnvHierarchical, v, on, err, want)
		}
	}
	t.Setenv(EnvHierarchical, "yes")
	_, _, err := hierConfig(comm.Config{})
	if want := `SYMDDP_MPI_HIERARCHICAL="yes": ` + values; err == nil || err.Error() != want {
		t.Errorf("%s=yes: %v, want %q", EnvHierarchical, err, want)
	}
	t.Setenv(EnvHierarchical, "on") // the option wins over the variable
	_, _, err = hierConfig(comm.Config{Options: map[string]string{"hierarchical": "2"}})
	if want := `comm.Config.Options["hierarchical"]="2": ` + values; err == nil || err.Error() != want {
		t.Errorf("option hierarchical=2: %v, want %q", err, want)
	}
}
