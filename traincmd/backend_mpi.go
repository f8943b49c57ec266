//go:build mpi

package traincmd

// The mpi comm backend, for runs under mpirun; only in binaries built with
// -tags mpi (go build -tags mpi ./cmd/train), which need an MPI library.
import _ "github.com/symddp/symddp/comm/mpi"
