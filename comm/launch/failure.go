package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/symddp/symddp/comm"
)

// A PE that Run started does not print its final error: it writes it to
// failure-<pe>.json in the job's run directory (ReportFailure), and Run puts
// it into the one message of the job's failure (PEError). So a failure is
// said once, by the launcher, instead of once by every PE that saw it and
// again in the failed PE's stderr tail; and a PE that missed a deadline is
// named instead of the PE that gave up waiting for it.

// failureReport is what a PE says about its own failure.
type failureReport struct {
	Error string `json:"error"`
	// Missing lists the PEs a deadline passed waiting for
	// (comm.TimeoutError): those are to blame, not this PE.
	Missing []int `json:"missing,omitempty"`
	// PeerFailed is true when this PE failed because a peer did
	// (comm.ErrPeerFailed): the peer's failure is the news.
	PeerFailed bool `json:"peer_failed,omitempty"`
	// Origin is the PE the error is about (OriginError), when it is not
	// the reporting PE's own: every PE fails alike when PE 0 cannot read a
	// checkpoint, and the launcher names PE 0.
	Origin *int `json:"origin,omitempty"`
}

// OriginError is an error every PE of a job returns alike about what one
// PE did (ddp's checkpoint errors: PE 0 reads and writes them). A PE that
// reports it (ReportFailure) names OriginPE as the one that failed, unless
// it is negative.
type OriginError interface {
	error
	OriginPE() int
}

func failurePath(runDir string, pe int) string {
	return filepath.Join(runDir, fmt.Sprintf("failure-%d.json", pe))
}

// ReportFailure hands err to the launcher of this PE, which prints it once
// when the job ends (see PEError). It returns false, having done nothing,
// when the process is not a PE that Run started (or the report cannot be
// written): the caller prints err itself then.
func (p Process) ReportFailure(err error) bool {
	if err == nil || p.Role != LocalPE || p.Config.RunDir == "" {
		return false
	}
	rep := failureReport{Error: err.Error(), PeerFailed: errors.Is(err, comm.ErrPeerFailed)}
	var oe OriginError
	if errors.As(err, &oe) && oe.OriginPE() >= 0 {
		pe := oe.OriginPE()
		rep.Origin = &pe
	}
	var te *comm.TimeoutError
	if errors.As(err, &te) {
		rep.Missing = te.Missing
	}
	js, jerr := json.Marshal(rep)
	if jerr != nil {
		return false
	}
	path := failurePath(p.Config.RunDir, p.Config.PE)
	tmp := path + ".tmp"
	if os.WriteFile(tmp, js, 0o600) != nil || os.Rename(tmp, path) != nil {
		os.Remove(tmp)
		return false
	}
	return true
}

// stoppingPath is the mark that the launcher writes into the run directory
// before it sends SIGTERM to the PEs of a job that is ending early (a PE
// failed, or Run's context ended): the PEs' signal is the launcher's, not
// the user's.
func stoppingPath(runDir string) string { return filepath.Join(runDir, "stopping") }

// StoppedByLauncher reports whether the launcher that started this PE is
// stopping its job because a PE failed (or its context ended): a PE that
// gets SIGTERM then need not say that it was asked to stop, since the
// launcher reports the failure. False for a process Run did not start, and
// for a signal the user sent (the launcher forwards SIGINT and SIGTERM
// without the mark).
func (p Process) StoppedByLauncher() bool {
	if p.Role != LocalPE || p.Config.RunDir == "" {
		return false
	}
	_, err := os.Stat(stoppingPath(p.Config.RunDir))
	return err == nil
}

// readFailure returns PE pe's report, or nil when it wrote none.
func readFailure(runDir string, pe int) *failureReport {
	b, err := os.ReadFile(failurePath(runDir, pe))
	if err != nil {
		return nil
	}
	var rep failureReport
	if json.Unmarshal(b, &rep) != nil || rep.Error == "" {
		return nil
	}
	return &rep
}
