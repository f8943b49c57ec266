// Package launchtest runs a test function in the N PE processes of a job:
// the test binary re-executes itself through comm/launch with
// -test.run=^TestX$ and the PE environment, each PE opens the backend and
// runs the body, and the parent test fails with the PEs' output if any PE
// fails. The backend must be linked in (a blank import, for example of
// comm/shm).
//
//	func TestAllReduce4(t *testing.T) {
//		launchtest.Run(t, launchtest.Job{NPEs: 4}, func(t *testing.T, c comm.Comm) {
//			// runs in each of the 4 PEs
//		})
//	}
//
// In a PE process, Run and Launch end the test after the body (as SkipNow),
// so code after them runs in the parent only. A test may start several jobs
// one after another; a PE of a later job passes through the earlier calls,
// where Run does nothing and Launch returns ("", nil) at once, so guard
// assertions on Launch's results with !InPE(). A PE whose body fails skips
// the closing collective and exits with status 1; the launcher then stops the
// others.
package launchtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/comm/launch"
	"github.com/symddp/symddp/internal/syncbuf"

	"github.com/symddp/symddp/internal/settings"
)

// Job describes the job a test runs in.
type Job struct {
	// NPEs is the number of PE processes (default 1).
	NPEs int
	// Backend is the comm backend (default comm.DefaultBackend).
	Backend string
	// HeapSize and Timeout are each PE's heap size and wait deadline (zero:
	// the backend's defaults).
	HeapSize int64
	Timeout  time.Duration
	// Env holds extra NAME=value variables for the PEs.
	Env []string
}

// envKey names the job a PE process was started for.
const envKey = settings.LaunchTest

// InPE reports whether this process is a PE started by this package.
func InPE() bool { return settings.Get(envKey) != "" }

// Run runs body in job.NPEs PE processes and fails t, showing every PE's
// output, unless they all succeed.
func Run(t *testing.T, job Job, body func(t *testing.T, c comm.Comm)) {
	t.Helper()
	out, err := Launch(t, job, body)
	if err != nil {
		t.Fatalf("job of %d PEs: %v\n---- output of the PEs ----\n%s", max(job.NPEs, 1), err, out)
	}
}

// Launch is Run that returns the launcher's error and the PEs' combined
// stdout and stderr instead of failing t: for tests of failures.
func Launch(t *testing.T, job Job, body func(t *testing.T, c comm.Comm)) (output string, err error) {
	t.Helper()
	key := nextKey(t)
	if InPE() {
		if settings.Get(envKey) == key {
			runPE(t, func(c comm.Comm) { body(t, c) })
			if !t.Failed() {
				t.SkipNow()
			}
			t.FailNow()
		}
		return "", nil
	}
	args := []string{"-test.run=" + exactPattern(t.Name()), "-test.v=true", "-test.count=1"}
	return launchJob(t, job, key, args, nil)
}

var (
	keysMu sync.Mutex
	keys   = map[testing.TB]int{}
)

// nextKey names the k-th job of this test invocation, the same way in the
// parent and in the PEs.
func nextKey(tb testing.TB) string {
	keysMu.Lock()
	defer keysMu.Unlock()
	keys[tb]++
	return fmt.Sprintf("%s#%d", tb.Name(), keys[tb])
}

// exactPattern is a -test.run or -test.bench pattern that matches name and
// nothing else.
func exactPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// launchJob re-executes this test binary as the PEs of job and returns their
// combined output and the launcher's error.
func launchJob(tb testing.TB, job Job, key string, args, env []string) (string, error) {
	ctx := context.Background()
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl.Add(-5*time.Second))
			defer cancel()
		}
	}
	var out syncbuf.Buffer
	err := launch.Run(ctx, launch.Spec{
		Args:     args,
		NPEs:     max(job.NPEs, 1),
		Backend:  job.Backend,
		Env:      append(append([]string{envKey + "=" + key}, env...), job.Env...),
		HeapSize: job.HeapSize,
		Timeout:  job.Timeout,
		Stdout:   &out,
		Stderr:   &out,
	})
	return out.String(), err
}

// runPE opens the backend from the PE environment, runs body and closes the
// runtime. After a failed body it does not close the runtime (a collective
// the peers might not join): the test ends, the process exits with status 1,
// and the peers see it go.
func runPE(t testing.TB, body func(c comm.Comm)) {
	cfg, backend, _, err := comm.ConfigFromEnv()
	if err != nil {
		t.Fatalf("launchtest: %v", err)
	}
	defer func() {
		if t.Failed() {
			fmt.Fprintf(os.Stderr, "launchtest: PE %d: %s failed (its messages are on stdout)\n", cfg.PE, t.Name())
		}
	}()
	c, err := comm.Open(backend, cfg)
	if err != nil {
		t.Fatalf("launchtest: PE %d: open %s: %v", cfg.PE, backend, err)
	}
	body(c)
	if t.Failed() {
		return
	}
	if err := c.Close(); err != nil && !errors.Is(err, comm.ErrClosed) {
		t.Fatalf("launchtest: PE %d: close: %v", cfg.PE, err)
	}
}
