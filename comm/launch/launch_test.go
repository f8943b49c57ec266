package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symddp/symddp/comm"
	"github.com/symddp/symddp/internal/syncbuf"
)

// spec is a job of n PEs of this test binary playing role.
func spec(role string, n int, out *syncbuf.Buffer) Spec {
	return Spec{Path: os.Args[0], Args: []string{}, NPEs: n, Env: []string{envRole + "=" + role}, Stdout: out, Stderr: out}
}

// ownHeapFiles lists heap files named after this process.
func ownHeapFiles(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(comm.HeapDir(), fmt.Sprintf("symddp-%d-*", os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRunGivesEveryPEItsEnvironment(t *testing.T) {
	var out syncbuf.Buffer
	s := spec("env", 3, &out)
	s.HeapSize, s.Timeout = 1<<24, 42*time.Second
	if err := Run(context.Background(), s); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	text := out.String()
	for pe := 0; pe < 3; pe++ {
		prefix := fmt.Sprintf("[pe %d] ", pe)
		want := fmt.Sprintf("%spe=%d npes=3 backend=shm heap=%s/symddp-%d-", prefix, pe, comm.HeapDir(), os.Getpid())
		if !strings.Contains(text, want) {
			t.Errorf("no line starting %q in:\n%s", want, text)
		}
		for _, line := range []string{"heap exists: true, run dir is a dir: true", "no newline at the end"} {
			if !strings.Contains(text, prefix+line+"\n") {
				t.Errorf("stderr line %q of PE %d not forwarded whole with its prefix:\n%s", line, pe, text)
			}
		}
	}
	if !strings.Contains(text, "size=16777216 timeout=42s rundir="+filepath.Join(os.TempDir(), "symddp-run-")) {
		t.Errorf("heap size, timeout or run dir not passed on:\n%s", text)
	}
	if left := ownHeapFiles(t); len(left) > 0 {
		t.Errorf("heap files left after the job: %v", left)
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("symddp-run-%d-*", os.Getpid())))
	if len(dirs) > 0 {
		t.Errorf("run directories left after the job: %v", dirs)
	}
}

func TestRunOnePEIsNotPrefixed(t *testing.T) {
	var out syncbuf.Buffer
	if err := Run(context.Background(), spec("env", 1, &out)); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	if !strings.HasPrefix(out.String(), "pe=0 npes=1") && !strings.Contains(out.String(), "\npe=0 npes=1") {
		t.Errorf("a one-PE job's output is not passed through as is:\n%s", out.String())
	}
}

func TestRunReportsTheFailedPEAndStopsTheOthers(t *testing.T) {
	var out syncbuf.Buffer
	start := time.Now()
	err := Run(context.Background(), spec("fail-on-1", 4, &out))
	var pe *PEError
	if !errors.As(err, &pe) {
		t.Fatalf("Run returned %v, want a *PEError\n%s", err, out.String())
	}
	if pe.PE != 1 || pe.ExitCode != 3 || pe.Signal != 0 || pe.ExitStatus() != 3 {
		t.Errorf("PEError %+v, want PE 1 with exit status 3", pe)
	}
	if len(pe.Stderr) != DefaultTailLines || pe.Stderr[0] != "line 11" || pe.Stderr[19] != "line 30" {
		t.Errorf("stderr tail %q, want lines 11 to 30", pe.Stderr)
	}
	if first := strings.SplitN(err.Error(), "\n", 2)[0]; first != "PE 1 failed: exit status 3; its last lines on stderr:" {
		t.Errorf("first line of the error %q", first)
	}
	// The others sleep for a minute and then say so, unless stopped.
	if strings.Contains(out.String(), "outlived the failed PE") {
		t.Errorf("the other PEs were not stopped (Run took %v):\n%s", time.Since(start), out.String())
	}
	if left := ownHeapFiles(t); len(left) > 0 {
		t.Errorf("heap files left after a failed job: %v", left)
	}
}

// The SIGTERM that stops the others after a failure is marked as the
// launcher's (Process.StoppedByLauncher): train's PEs then do not say
// "SIGTERM: stopping after the step in progress", which read as if the
// user had sent it.
func TestStopAfterAFailureIsTheLaunchers(t *testing.T) {
	var out syncbuf.Buffer
	err := Run(context.Background(), spec("trap-fail-on-1", 2, &out))
	var pe *PEError
	if !errors.As(err, &pe) || pe.PE != 1 {
		t.Fatalf("Run returned %v, want PE 1's failure\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "PE 0 got terminated, stopped by the launcher: true") {
		t.Errorf("PE 0 did not see the launcher's mark:\n%s", out.String())
	}
	if (Process{}).StoppedByLauncher() {
		t.Error("a process Run did not start is stopped by a launcher")
	}
}

func TestRunStopsWhenTheContextEnds(t *testing.T) {
	var out syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := Run(ctx, spec("sleep", 2, &out))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run returned %v, want context.DeadlineExceeded", err)
	}
	var pe *PEError
	if errors.As(err, &pe) {
		t.Errorf("PEs stopped by the launcher reported as failed: %v", err)
	}
}

func TestRunRejectsBadSpecs(t *testing.T) {
	if err := Run(context.Background(), Spec{NPEs: 0}); err == nil {
		t.Errorf("0 PEs: no error")
	}
	err := Run(context.Background(), Spec{Path: "/nonexistent/binary", NPEs: 2})
	if err == nil || !strings.Contains(err.Error(), "start PE 0") {
		t.Errorf("a missing binary: %v, want an error starting PE 0", err)
	}
}

func TestPEErrorOfASignal(t *testing.T) {
	e := &PEError{PE: 3, ExitCode: -1, Signal: syscall.SIGKILL}
	if e.Error() != "PE 3 failed: killed by signal 9 (killed)"+oomHint || e.ExitStatus() != 137 {
		t.Errorf("got %q and status %d", e.Error(), e.ExitStatus())
	}
	// only SIGKILL gets the hint: a PE that SIGTERM or SIGSEGV ended did not meet the out-of-memory killer
	if e := (&PEError{PE: 1, ExitCode: -1, Signal: syscall.SIGSEGV}); e.Error() != "PE 1 failed: killed by signal 11 (segmentation fault)" {
		t.Errorf("SIGSEGV: got %q", e.Error())
	}
	// a Go runtime out of memory (exit 2, its dump on stderr) is said in words
	oom := &PEError{PE: 0, ExitCode: 2, Stderr: []string{"fatal error: out of memory", "...", "goroutine 27 [chan receive]:"}}
	if got := oom.Error(); !strings.HasPrefix(got, "PE 0 failed: exit status 2"+outOfMemory+"; its last lines on stderr:\n    fatal error: out of memory") {
		t.Errorf("out of memory: got %q", got)
	}
	wrapped := fmt.Errorf("%w by interrupt: %w", ErrInterrupted, e)
	for _, c := range []struct {
		err  error
		want int
	}{{nil, 0}, {e, 137}, {&PEError{PE: 1, ExitCode: 3}, 3}, {wrapped, 130}, {errors.New("other"), 1}} {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestRemoveStaleKeepsLiveLaunchers(t *testing.T) {
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, fmt.Sprintf("symddp-%d-0123", dead.Process.Pid))
	live := filepath.Join(dir, fmt.Sprintf("symddp-%d-4567", os.Getppid()))
	other := filepath.Join(dir, "symddp-notapid-89")
	for _, p := range []string{stale, live, other} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := removeStale(dir, heapPrefix, nil)
	if err != nil || len(removed) != 1 || removed[0] != stale {
		t.Fatalf("removeStale removed %v (%v), want only %s", removed, err, stale)
	}
	for _, p := range []string{live, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

// TestKilledLauncher kills a launcher with SIGKILL: its PEs must die with it
// (Pdeathsig), and the next job must remove the heap file it left.
func TestKilledLauncher(t *testing.T) {
	pids := t.TempDir()
	launcher := exec.Command(os.Args[0])
	launcher.Env = append(os.Environ(), envRole+"=launcher", "LAUNCH_TEST_PE_ROLE=sleep", envPidDir+"="+pids)
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	pePids := waitForFiles(t, pids, "pe-0", "pe-1")
	heaps, _ := filepath.Glob(filepath.Join(comm.HeapDir(), fmt.Sprintf("symddp-%d-*", launcher.Process.Pid)))
	if len(heaps) != 1 {
		t.Fatalf("heap files of the launcher: %v, want one", heaps)
	}
	launcher.Process.Kill()
	launcher.Wait()
	for _, pid := range pePids {
		waitGone(t, pid)
	}
	if _, err := os.Stat(heaps[0]); err != nil {
		t.Fatalf("the killed launcher's heap file is already gone (%v): nothing to test", err)
	}
	var out syncbuf.Buffer
	if err := Run(context.Background(), spec("env", 1, &out)); err != nil {
		t.Fatalf("next job: %v\n%s", err, out.String())
	}
	if _, err := os.Stat(heaps[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale heap %s survived the next job's start: %v", heaps[0], err)
	}
}

// TestSignalsAreForwarded sends SIGINT to a launcher whose PEs trap it: they
// must get it, exit cleanly, and the launcher must report the interruption.
func TestSignalsAreForwarded(t *testing.T) {
	dir := t.TempDir()
	launcher := exec.Command(os.Args[0])
	launcher.Env = append(os.Environ(), envRole+"=launcher", "LAUNCH_TEST_PE_ROLE=trap", envPidDir+"="+dir)
	var out syncbuf.Buffer
	launcher.Stdout, launcher.Stderr = &out, &out
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	waitForFiles(t, dir, "ready-0", "ready-1")
	launcher.Process.Signal(syscall.SIGINT)
	err := launcher.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("launcher ended with %v, want exit status 130\n%s", err, out.String())
	}
	for pe := 0; pe < 2; pe++ {
		if want := fmt.Sprintf("PE %d got interrupt", pe); !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// waitForFiles waits (up to 20 s) for files in dir and returns their
// contents as pids where they hold one.
func waitForFiles(t *testing.T, dir string, names ...string) []int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var pids []int
	for _, n := range names {
		for {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err == nil {
				if pid, err := strconv.Atoi(string(b)); err == nil {
					pids = append(pids, pid)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not appear in %s", n, dir)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return pids
}

// waitGone waits (up to 20 s) for process pid to be gone or a zombie (an
// orphan's new parent may be slow to reap it, or never do so in a container).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for processExists(pid) && !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("PE process %d outlived its killed launcher", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// zombie reports whether pid has exited but not been reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && strings.HasPrefix(rest, "Z")
}

// TestSettingsReachThePEs: SYMDDP_* settings other than the PE's own
// variables (SYMDDP_BLAS, SYMDDP_HEAP_DIR) are passed on; a stale SYMDDP_PE
// is not.
func TestSettingsReachThePEs(t *testing.T) {
	env := []string{}
	t.Setenv("SYMDDP_BLAS", "gonum")
	t.Setenv(comm.EnvPE, "7")
	for _, kv := range environ(nil, comm.Config{PE: 1, NPEs: 2}, "shm") {
		if strings.HasPrefix(kv, "SYMDDP_") {
			env = append(env, kv)
		}
	}
	got := strings.Join(env, " ")
	if !strings.Contains(got, "SYMDDP_BLAS=gonum") || strings.Contains(got, "SYMDDP_PE=7") || !strings.Contains(got, "SYMDDP_PE=1") {
		t.Fatalf("PE environment %q: want SYMDDP_BLAS=gonum and SYMDDP_PE=1, not SYMDDP_PE=7", got)
	}
}
