// Package bench holds the sources of symddp's reference benchmarks written in
// other languages, embedded so that the symbench command can build them on the
// machine it runs on, wherever the command was built.
package bench

import _ "embed"

// MPIAllreduceC is the C source of mpi_allreduce, which times Open MPI's
// MPI_Allreduce the way `symbench allreduce` times the shm backend. Build it
// with mpicc; see the comment at its top for its arguments and output.
//
//go:embed mpi_allreduce.c
var MPIAllreduceC []byte
