//go:build mpi

package ddp

// The mpi comm backend, for programs that mpirun starts (Launch joins its
// job): linked into every program that uses ddp when it is built with
// -tags mpi, as Job.Backend and the package documentation say, so that a
// program of one's own needs no import of comm/mpi to run under mpirun.
import _ "github.com/symddp/symddp/comm/mpi"
