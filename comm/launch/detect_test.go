package launch

import (
	"testing"
)

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDetectMPI(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want MPIEnv
		ok   bool
		err  bool
	}{
		{"none", map[string]string{"HOME": "/root"}, MPIEnv{}, false, false},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "PMIX_RANK": "3"},
			MPIEnv{Launcher: "openmpi", Rank: 3, Size: 8, LocalRank: 1}, true, false},
		{"pmix", map[string]string{"PMIX_RANK": "2"}, MPIEnv{Launcher: "pmix", Rank: 2, LocalRank: -1}, true, false},
		{"mpich", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0"},
			MPIEnv{Launcher: "pmi", Rank: 1, Size: 4, LocalRank: 0}, true, false},
		{"openmpi local size", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"},
			MPIEnv{Launcher: "openmpi", Rank: 3, Size: 8, LocalRank: -1, LocalSize: 4}, true, false},
		{"pmix local size", map[string]string{"PMIX_RANK": "2", "PMIX_LOCAL_SIZE": "2"}, MPIEnv{Launcher: "pmix", Rank: 2, LocalRank: -1, LocalSize: 2}, true, false},
		{"mpich local size", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"},
			MPIEnv{Launcher: "pmi", Rank: 1, Size: 4, LocalRank: 1, LocalSize: 2}, true, false},
		{"bad local size", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "4", "MPI_LOCALNRANKS": "x"}, MPIEnv{}, true, true},
		{"bad rank", map[string]string{"PMI_RANK": "one", "PMI_SIZE": "4"}, MPIEnv{}, true, true},
		{"rank past size", map[string]string{"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "4"}, MPIEnv{}, true, true},
	} {
		got, ok, err := DetectMPIFrom(lookupIn(c.env))
		if ok != c.ok || (err != nil) != c.err || (err == nil && got != c.want) {
			t.Errorf("%s: got %+v, %v, %v; want %+v, %v, error %v", c.name, got, ok, err, c.want, c.ok, c.err)
		}
	}
}
