package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/symddp/symddp/bench"
)

// mpiRunner builds bench/mpi_allreduce.c with mpicc in a temporary directory
// and runs it under mpirun.
type mpiRunner struct {
	dir     string
	binary  string
	mpirun  string
	extra   []string
	version string
}

// newMPIRunner finds mpicc and mpirun and builds the benchmark. extraArgs
// are passed to mpirun before the program.
func newMPIRunner(extraArgs string) (*mpiRunner, error) {
	mpicc, err := exec.LookPath("mpicc")
	if err != nil {
		return nil, fmt.Errorf("mpicc not found (Debian: apt-get install openmpi-bin libopenmpi-dev)")
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		return nil, fmt.Errorf("mpirun not found (Debian: apt-get install openmpi-bin)")
	}
	dir, err := os.MkdirTemp("", "symbench-mpi-")
	if err != nil {
		return nil, err
	}
	m := &mpiRunner{dir: dir, binary: filepath.Join(dir, "mpi_allreduce"), mpirun: mpirun, extra: strings.Fields(extraArgs)}
	src := filepath.Join(dir, "mpi_allreduce.c")
	if err := os.WriteFile(src, bench.MPIAllreduceC, 0o600); err != nil {
		m.close()
		return nil, err
	}
	if out, err := exec.Command(mpicc, "-O2", "-o", m.binary, src).CombinedOutput(); err != nil {
		m.close()
		return nil, fmt.Errorf("mpicc: %v\n%s", err, out)
	}
	if out, err := exec.Command(mpirun, "--version").Output(); err == nil {
		m.version = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	return m, nil
}

// allReduce runs the benchmark on n ranks and returns rank 0's results by
// size.
func (m *mpiRunner) allReduce(ctx context.Context, n int, opts allReduceOpts) (map[int64]result, error) {
	return m.runRanks(ctx, n, len(opts.sizes()), false, m.binary,
		strconv.FormatInt(opts.minBytes, 10), strconv.FormatInt(opts.maxBytes, 10), strconv.FormatInt(opts.step, 10),
		strconv.Itoa(opts.reps), strconv.FormatFloat(opts.target.Seconds(), 'g', -1, 64))
}

// runRanks runs mpirun on n ranks with the runner's extra arguments, then
// args (more mpirun options, the program and its arguments), and returns
// rank 0's results by size, which must be one for each of the sizes sizes.
// withStdout adds the program's standard output to the error when mpirun
// fails.
func (m *mpiRunner) runRanks(ctx context.Context, n, sizes int, withStdout bool, args ...string) (map[int64]result, error) {
	args = append(append([]string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(n)}, m.extra...), args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, m.mpirun, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		out := stderr.String()
		if withStdout {
			out = stdout.String() + out
		}
		return nil, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	res, err := parseResults(stdout.String(), "")
	if err != nil {
		return nil, err
	}
	if len(res) != sizes {
		return nil, fmt.Errorf("%d results for %d sizes:\n%s%s", len(res), sizes, stdout.String(), stderr.String())
	}
	return res, nil
}

// describe names the MPI and how it was run.
func (m *mpiRunner) describe() string {
	return strings.TrimSpace(fmt.Sprintf("%s, run as mpirun --allow-run-as-root --oversubscribe %s", m.version, strings.Join(m.extra, " ")))
}

// close removes the build directory; a nil runner is fine.
func (m *mpiRunner) close() {
	if m != nil {
		os.RemoveAll(m.dir)
	}
}
