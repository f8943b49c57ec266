package mpi_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// This file is not behind the mpi tag: `go test ./...` runs it. It builds
// cmd/train with -tags mpi itself and runs it under mpirun.

// trainFlags is a short run on synthetic data, the same for every backend.
var trainFlags = []string{"--model", "mlp", "--dataset", "synthetic", "--max-steps", "40", "--batch-size", "64",
	"--hidden", "64", "--schedule", "constant", "--log-every", "20", "--no-progress"}

// buildTrain builds cmd/train into dir, with the given build tags.
func buildTrain(t *testing.T, dir, name string, tags ...string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "github.com/symddp/symddp/cmd/train")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// trainResult is what a run printed.
type trainResult struct {
	accuracy float64 // test accuracy in percent
	hash     string  // the parameter hash of the replica check
}

var (
	accuracyRE = regexp.MustCompile(`test accuracy ([0-9.]+)%`)
	replicasRE = regexp.MustCompile(`replicas identical on all 4 PEs \(step 40, parameter hash ([0-9a-f]+)\)`)
)

// parseTrain reads the summary of a successful 4-PE run of 40 steps on
// backend, or fails t.
func parseTrain(t *testing.T, what, backend, out string) trainResult {
	t.Helper()
	acc := accuracyRE.FindStringSubmatch(out)
	rep := replicasRE.FindStringSubmatch(out)
	if acc == nil || rep == nil || !strings.Contains(out, "done: 40 steps") || !strings.Contains(out, "on 4 PEs ("+backend+",") {
		t.Fatalf("%s: no summary of 40 steps on 4 PEs (%s) with test accuracy and identical replicas:\n%s", what, backend, out)
	}
	a, err := strconv.ParseFloat(acc[1], 64)
	if err != nil {
		t.Fatalf("%s: accuracy %q: %v", what, acc[1], err)
	}
	return trainResult{accuracy: a, hash: rep[1]}
}

// TestTrainUnderMPIRun trains the same short run four ways — 4 PEs on shm
// (train --pes 4), 4 ranks of mpirun on the mpi backend with Open MPI's
// defaults, the same with all traffic on TCP as between hosts, and in
// hierarchical mode — and checks that each ends with identical replicas and
// the same test accuracy (within 0.5 points: MPI adds the PEs' gradients in
// another order than shm). It also checks the launcher errors under mpirun: --pes that does
// not match, a binary built without -tags mpi, and a PE that stalls, which
// must end the job with a message naming it.
func TestTrainUnderMPIRun(t *testing.T) {
	if inChild() {
		t.Skip("runs mpirun itself")
	}
	mpirunPath := needMPI(t)
	dir := t.TempDir()
	bin := buildTrain(t, dir, "train", "mpi")

	out, err := exec.Command(bin, append([]string{"--pes", "4"}, trainFlags...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("train --pes 4: %v\n%s", err, out)
	}
	shm := parseTrain(t, "train --pes 4", "shm", string(out))

	for _, tc := range []struct {
		name string
		opts []string
		env  []string
	}{
		{"mpirun", nil, nil},
		{"mpirun over TCP", tcpOnly, nil},
		{"mpirun, hierarchical", []string{"--mca", "osc", "^ucx", "-x", "SYMDDP_MPI_HIERARCHICAL"}, []string{"SYMDDP_MPI_HIERARCHICAL=1"}},
	} {
		out, err := mpirun(t, mpirunPath, 4, tc.opts, tc.env, bin, append([]string{"--backend", "mpi"}, trainFlags...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		got := parseTrain(t, tc.name, "mpi", out)
		if d := got.accuracy - shm.accuracy; d < -0.5 || d > 0.5 {
			t.Errorf("%s: test accuracy %.2f%%, shm %.2f%%: want them within 0.5 points", tc.name, got.accuracy, shm.accuracy)
		}
		t.Logf("%s: test accuracy %.2f%% (shm %.2f%%), parameter hash %s (shm %s)", tc.name, got.accuracy, shm.accuracy, got.hash, shm.hash)
	}

	for _, tc := range []struct {
		name string
		bin  string
		args []string
		want string
		opts []string
	}{
		{"--pes that does not match", bin, []string{"--pes", "4"},
			"train: --pes 4 does not match the 2 processes mpirun started (drop --pes under mpirun)", nil},
		{"a binary without -tags mpi", buildTrain(t, dir, "train-plain"), nil,
			"train: this train binary has no MPI support: rebuild it with `go build -tags mpi ./cmd/train`", nil},
		{"a PE that stalls", bin, []string{"--timeout", "4s", "--fault-inject", "pe=1,step=5,mode=hang"},
			"deadline of 4s passed; PEs not arrived: [1]; ending the job with MPI_Abort", nil},
		// the PE and the operation named once (it was "mpi: PE 0: open: mpi: PE 0: open: ...")
		{"no one-sided component", bin, nil,
			"train: open mpi backend: mpi: PE 0: open: MPI_Win_allocate: MPI_ERR_WIN: invalid window (MPI error 53); MPI found no one-sided (osc) component for this job",
			[]string{"--mca", "osc", "^ucx,pt2pt,sm,rdma"}},
	} {
		args := append(append([]string{"--backend", "mpi"}, trainFlags...), tc.args...)
		out, err := mpirun(t, mpirunPath, 2, tc.opts, nil, tc.bin, args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: mpirun -np 2 %s %s: %v; want a failed job whose output has %q:\n%s",
				tc.name, filepath.Base(tc.bin), strings.Join(tc.args, " "), err, tc.want, out)
		}
	}
}

// TestLaunchUnderMPIRun runs a program of one's own, examples/customdata
// (ddp.Launch, no import of comm/mpi), built with -tags mpi as the ddp
// package documentation says, as 2 ranks of mpirun: Launch must join the
// job on the mpi backend. Before ddp linked comm/mpi in under the tag, every
// rank stopped with "started by mpirun, but the mpi backend is not in this
// build: build the program with -tags mpi", which it had been.
func TestLaunchUnderMPIRun(t *testing.T) {
	if inChild() {
		t.Skip("runs mpirun itself")
	}
	mpirunPath := needMPI(t)
	bin := filepath.Join(t.TempDir(), "customdata")
	args := []string{"build", "-tags", "mpi", "-o", bin, "github.com/symddp/symddp/examples/customdata"}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	out, err := mpirun(t, mpirunPath, 2, nil, nil, bin, "--epochs", "1", "--train-size", "256", "--test-size", "64")
	const want = "replicas identical on both PEs (step 4, "
	if err != nil || !strings.Contains(out, want) || strings.Contains(out, "not in this build") {
		t.Fatalf("mpirun -np 2 customdata (built with -tags mpi): %v; want a run of 4 steps ending with %q:\n%s", err, want, out)
	}
}
