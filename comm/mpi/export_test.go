//go:build mpi

package mpi

import (
	"os"
	"strconv"
)

// EnvTestMaxCount, set in a rank's environment, lowers the largest count
// ReduceScatter and AllGather pass to MPI (maxMPICount) in that test binary,
// so that small buffers take the paths of shards past MPI's int.
const EnvTestMaxCount = "SYMDDP_MPI_TEST_MAX_COUNT"

func init() {
	if v, err := strconv.Atoi(os.Getenv(EnvTestMaxCount)); err == nil && v > 0 {
		maxMPICount = int64(v)
	}
}
