package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MPIEnv is what an MPI launcher (mpirun, mpiexec, srun with PMI) tells the
// processes it starts.
type MPIEnv struct {
	// Launcher names the variables found: "openmpi", "pmix" or "pmi".
	Launcher string
	// Rank is this process's rank in the job.
	Rank int
	// Size is the job's size; 0 when the launcher does not say (PMIx alone).
	Size int
	// LocalRank is the rank among the job's processes on this host; -1 when
	// the launcher does not say.
	LocalRank int
	// LocalSize is the number of the job's processes on this host; 0 when
	// the launcher does not say.
	LocalSize int
}

// DetectMPI reports whether this process was started by an MPI launcher, and
// the rank, size, local rank and local size it was given: Open MPI's
// OMPI_COMM_WORLD_*, then PMIx's PMIX_RANK (and PMIX_LOCAL_SIZE), then PMI's
// PMI_RANK/PMI_SIZE (MPICH's Hydra, with MPI_LOCALRANKID and
// MPI_LOCALNRANKS). A malformed value is an error naming the variable.
func DetectMPI() (env MPIEnv, ok bool, err error) {
	return DetectMPIFrom(os.LookupEnv)
}

// DetectMPIFrom is DetectMPI over any variable lookup.
func DetectMPIFrom(lookup func(string) (string, bool)) (env MPIEnv, ok bool, err error) {
	num := func(name string, def int) (int, error) {
		v, ok := lookup(name)
		if !ok || v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("launch: %s=%q: not a rank or size", name, v)
		}
		return n, nil
	}
	var rankVar, sizeVar, localVar, localSizeVar string
	switch {
	case has(lookup, "OMPI_COMM_WORLD_RANK"):
		env.Launcher, rankVar, sizeVar, localVar = "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"
		localSizeVar = "OMPI_COMM_WORLD_LOCAL_SIZE"
	case has(lookup, "PMIX_RANK"):
		env.Launcher, rankVar, localSizeVar = "pmix", "PMIX_RANK", "PMIX_LOCAL_SIZE"
	case has(lookup, "PMI_RANK"):
		env.Launcher, rankVar, sizeVar, localVar = "pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"
		localSizeVar = "MPI_LOCALNRANKS"
	default:
		return MPIEnv{}, false, nil
	}
	if env.Rank, err = num(rankVar, 0); err != nil {
		return MPIEnv{}, true, err
	}
	if sizeVar != "" {
		if env.Size, err = num(sizeVar, 0); err != nil {
			return MPIEnv{}, true, err
		}
	}
	env.LocalRank = -1
	if localVar != "" {
		if env.LocalRank, err = num(localVar, -1); err != nil {
			return MPIEnv{}, true, err
		}
	}
	if env.LocalSize, err = num(localSizeVar, 0); err != nil {
		return MPIEnv{}, true, err
	}
	if env.Size > 0 && env.Rank >= env.Size {
		return MPIEnv{}, true, fmt.Errorf("launch: %s=%d is not below %s=%d", rankVar, env.Rank, sizeVar, env.Size)
	}
	return env, true, nil
}

func has(lookup func(string) (string, bool), name string) bool {
	_, ok := lookup(name)
	return ok
}
