//go:build !mpi

package main

// Without the mpi build tag the allreduce-mpi subcommand only says how to
// get it (allreduce_mpi.go has the real one).
func init() {
	register("allreduce-mpi", "allreduce of the mpi backend under mpirun (needs a build with -tags mpi)", func([]string) error {
		return errNoMPI
	})
}
