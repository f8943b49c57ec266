//go:build !mpi

package mpi_test

import "testing"

// TestConformance stands in for the MPI tests, which need the build tag.
func TestConformance(t *testing.T) {
	t.Skip("comm/mpi is built only with -tags mpi: go test -tags mpi ./comm/mpi")
}
