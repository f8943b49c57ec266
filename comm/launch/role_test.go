package launch

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/symddp/symddp/comm"
)

// TestDetect: SYMDDP_PE makes a local PE (even under mpirun), mpirun's
// variables a rank, nothing a starter; a malformed variable is an error
// naming it.
func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		role Role
		pe   int
		npes int
		err  string
	}{
		{"starter", map[string]string{}, Starter, 0, 0, ""},
		{"local PE", map[string]string{"SYMDDP_PE": "2", "SYMDDP_NPES": "4", "SYMDDP_RUN_DIR": "/r"}, LocalPE, 2, 4, ""},
		{"local PE under mpirun", map[string]string{"SYMDDP_PE": "1", "SYMDDP_NPES": "2", "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, LocalPE, 1, 2, ""},
		{"open mpi rank", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, MPIRank, 3, 4, ""},
		{"pmix rank", map[string]string{"PMIX_RANK": "5"}, MPIRank, 5, 0, ""},
		{"bad PE", map[string]string{"SYMDDP_PE": "x", "SYMDDP_NPES": "4"}, Starter, 0, 0, "SYMDDP_PE"},
		{"bad rank", map[string]string{"OMPI_COMM_WORLD_RANK": "-1"}, Starter, 0, 0, "OMPI_COMM_WORLD_RANK"},
	} {
		p, err := DetectFrom(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want one naming %s", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case p.Role != tc.role || p.Config.PE != tc.pe || p.Config.NPEs != tc.npes:
			t.Errorf("%s: %v PE %d of %d, want %v PE %d of %d", tc.name, p.Role, p.Config.PE, p.Config.NPEs, tc.role, tc.pe, tc.npes)
		}
	}
}

// TestReportFailure: a local PE's report reaches the launcher's reader,
// with the PEs a deadline waited for; other roles report nothing.
func TestReportFailure(t *testing.T) {
	dir := t.TempDir()
	pe := Process{Role: LocalPE}
	pe.Config.PE, pe.Config.NPEs, pe.Config.RunDir = 1, 3, dir
	if !pe.ReportFailure(errString("step 7: not finite")) {
		t.Fatal("a local PE with a run directory could not report")
	}
	if rep := readFailure(dir, 1); rep == nil || rep.Error != "step 7: not finite" || rep.PeerFailed || len(rep.Missing) != 0 {
		t.Fatalf("report %+v", rep)
	}
	pe.Config.PE = 2
	pe.ReportFailure(fmt.Errorf("step 3: %w", &comm.TimeoutError{PE: 2, Op: "barrier", Missing: []int{0}}))
	if rep := readFailure(dir, 2); rep == nil || !slices.Equal(rep.Missing, []int{0}) {
		t.Fatalf("deadline report %+v, want PE 0 missing", rep)
	}
	if readFailure(dir, 0) != nil {
		t.Error("PE 0 reported nothing, yet a report was read")
	}
	if (Process{Role: MPIRank}).ReportFailure(errString("x")) || (Process{}).ReportFailure(errString("x")) {
		t.Error("a rank or a starter reported to a launcher")
	}
}

type errString string

func (e errString) Error() string { return string(e) }
