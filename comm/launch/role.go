package launch

import (
	"os"

	"github.com/symddp/symddp/comm"
)

// Role is what a process is in a job.
type Role int

// The roles of a process (Detect).
const (
	// Starter is a process started by hand: it starts the PEs (Run), or
	// runs the only one itself.
	Starter Role = iota
	// LocalPE is a PE that Run started (SYMDDP_PE is set).
	LocalPE
	// MPIRank is a process that an MPI launcher started: one PE of a job
	// whose size and rank the launcher decided.
	MPIRank
)

// String names the role.
func (r Role) String() string {
	switch r {
	case LocalPE:
		return "local PE"
	case MPIRank:
		return "MPI rank"
	}
	return "starter"
}

// Process is this process's place in a job, as Detect finds it.
type Process struct {
	Role Role
	// Config is the PE's configuration: for LocalPE all of it, from the
	// launcher's variables; for MPIRank the rank (PE) and job size (NPEs,
	// 0 when the MPI launcher does not say); zero for Starter.
	Config comm.Config
	// Backend is the comm backend the launcher chose (LocalPE only).
	Backend string
	// MPI is what the MPI launcher said (MPIRank only).
	MPI MPIEnv
}

// Detect decides this process's role, the one decision that ddp.Launch and
// cmd/train share: a PE started by Run (SYMDDP_PE set; this wins, so a
// launcher run under mpirun still starts PEs of its own), else a rank of an
// MPI launcher (DetectMPI), else a starter. A malformed variable is an
// error naming it.
func Detect() (Process, error) {
	return DetectFrom(os.LookupEnv)
}

// DetectFrom is Detect over any variable lookup.
func DetectFrom(lookup func(string) (string, bool)) (Process, error) {
	cfg, backend, isPE, err := comm.ConfigFromLookup(lookup)
	if err != nil {
		return Process{}, err
	}
	if isPE {
		return Process{Role: LocalPE, Config: cfg, Backend: backend}, nil
	}
	mpi, ok, err := DetectMPIFrom(lookup)
	if err != nil {
		return Process{}, err
	}
	if ok {
		return Process{Role: MPIRank, Config: comm.Config{PE: mpi.Rank, NPEs: mpi.Size}, MPI: mpi}, nil
	}
	return Process{Role: Starter}, nil
}
