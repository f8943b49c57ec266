//go:build mpi

package mpi_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/commtest"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/comm/mpi"
)

// runJob runs body in np ranks of this test binary under mpirun, with extra
// mpirun options and environment, and returns their combined output and
// mpirun's error. In a rank it opens the mpi backend, runs body and prints
// "mpitest: PE p of n: <t.Name()> passed" when body did not fail; it then
// ends the test (so code after runJob runs in the parent only).
func runJob(t *testing.T, np int, mpiOpts, env []string, body func(t *testing.T, c comm.Comm)) (string, error) {
	t.Helper()
	if inChild() {
		if os.Getenv(envChild) != t.Name() {
			t.SkipNow()
		}
		mpiEnv, ok, err := launch.DetectMPI()
		if err != nil || !ok {
			t.Fatalf("not started by mpirun (%v)", err)
		}
		cfg := comm.Config{PE: mpiEnv.Rank, NPEs: mpiEnv.Size, Timeout: timeoutOf(t)}
		c, err := comm.Open("mpi", cfg)
		if err != nil {
			t.Fatalf("open mpi: %v", err)
		}
		body(t, c)
		if t.Failed() {
			t.FailNow() // exit without MPI_Finalize: mpirun stops the job
		}
		if err := c.Close(); err != nil && !strings.Contains(err.Error(), comm.ErrClosed.Error()) {
			t.Fatalf("close: %v", err)
		}
		fmt.Printf("mpitest: PE %d of %d: %s passed\n", c.MyPE(), c.NPEs(), t.Name())
		t.SkipNow()
	}
	mpirunPath := needMPI(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]string{"-x", envChild}, mpiOpts...)
	env = append([]string{envChild + "=" + t.Name()}, env...)
	return mpirun(t, mpirunPath, np, opts, env, exe, "-test.run="+exactPattern(t.Name()), "-test.v=true", "-test.count=1")
}

// timeoutOf is the deadline of a test job's waits: SYMDDP_TIMEOUT if set
// (a Go duration), one minute otherwise.
func timeoutOf(t *testing.T) time.Duration {
	v := os.Getenv(comm.EnvTimeout)
	if v == "" {
		return time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", comm.EnvTimeout, v, err)
	}
	return d
}

// exactPattern is a -test.run pattern that matches name and nothing else.
func exactPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// TestConformance runs the shared conformance suite in jobs of 1, 2 and 4
// ranks: with Open MPI's defaults (shared memory between the ranks), with
// all traffic on TCP as between hosts, and in hierarchical mode, on one host
// and on hosts of 2 ranks simulated on this one.
func TestConformance(t *testing.T) {
	hier := []string{mpi.EnvHierarchical + "=1"}
	for _, tc := range []struct {
		name string
		np   int
		opts []string
		env  []string
	}{
		{"np=1", 1, nil, nil},
		{"np=2", 2, nil, nil},
		{"np=4", 4, nil, nil},
		{"np=2,tcp", 2, tcpOnly, nil},
		{"np=4,tcp", 4, tcpOnly, nil},
		{"np=3,hier", 3, nil, hier},
		{"np=4,hier,2hosts", 4, tcpHier, append([]string{mpi.EnvHostSize + "=2"}, hier...)},
		// reduce-scatter and all-gather as for shards past MPI's int counts
		{"np=3,maxcount=100", 3, nil, []string{mpi.EnvTestMaxCount + "=100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			for _, e := range tc.env {
				name, _, _ := strings.Cut(e, "=")
				opts = append(opts, "-x", name)
			}
			out, err := runJob(t, tc.np, opts, tc.env, func(t *testing.T, c comm.Comm) {
				if c.NPEs() != tc.np || c.Backend() != "mpi" {
					t.Fatalf("NPEs() = %d, Backend() = %q; want %d, mpi", c.NPEs(), c.Backend(), tc.np)
				}
				commtest.RunAll(t, c, commtest.Options{Reopen: func() (comm.Comm, error) {
					return comm.Open("mpi", comm.Config{PE: c.MyPE(), NPEs: c.NPEs()})
				}})
			})
			if err != nil || strings.Count(out, " passed\n") != tc.np || strings.Contains(out, "--- FAIL") {
				t.Fatalf("mpirun -np %d %s: %v\n---- output ----\n%s", tc.np, strings.Join(opts, " "), err, out)
			}
		})
	}
}
