//go:build !mpi

package main

import "errors"

// errNoMPI is what allreduce-mpi says in a build without the mpi tag.
var errNoMPI = errors.New("this symbench has no MPI backend: rebuild it with `go build -tags mpi ./cmd/symbench` (needs libopenmpi-dev)")

// Without the mpi build tag the allreduce-mpi subcommand only says how to
// get it (allreduce_mpi.go has the real one).
func init() {
	register("allreduce-mpi", "allreduce of the mpi backend under mpirun (needs a build with -tags mpi)", func([]string) error {
		return errNoMPI
	})
}
