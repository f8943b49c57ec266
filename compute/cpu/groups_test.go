package cpu

import (
	"testing"

	"github.com/symddp/symddp/compute/computetest"
)

// The transformer's operation groups, on every BLAS.
func TestGroupsConformance(t *testing.T) {
	for name, e := range engines(t) {
		t.Run(name, func(t *testing.T) { computetest.RunGroups(t, e) })
	}
}
