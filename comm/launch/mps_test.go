package launch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/symddp/symddp/internal/syncbuf"
)

// fakeMPS puts a stand-in nvidia-cuda-mps-control first on PATH: "-d"
// starts a "daemon" (a sleep in its own session, like the real daemon,
// which outlives its launcher) and creates the control pipe; "quit" on
// stdin kills it and removes the pipe. It returns the daemon's pid file
// name inside a pipe directory.
func fakeMPS(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
if [ "$1" = "-d" ]; then
	touch "$CUDA_MPS_PIPE_DIRECTORY/control"
	setsid sleep 300 >/dev/null 2>&1 </dev/null &
	echo $! > "$CUDA_MPS_PIPE_DIRECTORY/daemon.pid"
	exit 0
fi
read cmd
if [ "$cmd" = quit ]; then
	kill "$(cat "$CUDA_MPS_PIPE_DIRECTORY/daemon.pid")"
	rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
fi
`
	if err := os.WriteFile(filepath.Join(dir, "nvidia-cuda-mps-control"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// alive reports whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(f) == 0 || f[0] != "Z"
}

// gone waits up to 5 s for pid to stop running.
func gone(pid int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		reap(pid)
		if !alive(pid) {
			return true
		}
	}
	return false
}

// reap collects pid if it is a zombie child of this process.
func reap(pid int) { syscall.Wait4(pid, nil, syscall.WNOHANG, nil) }

// daemonPid reads the fake daemon's pid from a run directory.
func daemonPid(t *testing.T, pipe string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pipe, "daemon.pid"))
	if err != nil {
		t.Fatalf("no daemon pid in %s: %v", pipe, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestMPSDaemonLifecycle: the PEs see the private pipe directory and a
// share that sums to at most 100, and the daemon is gone when Run returns,
// both after success and after a failed PE.
func TestMPSDaemonLifecycle(t *testing.T) {
	fakeMPS(t)
	for _, role := range []string{"mps", "fail-on-1"} {
		var out syncbuf.Buffer
		s := spec(role, 3, &out)
		s.MPS = &MPS{PEsPerGPU: 3}
		var pipe string
		s.Env = append(s.Env, "LAUNCH_TEST_ROLE="+role)
		err := Run(context.Background(), s)
		if role == "mps" {
			if err != nil {
				t.Fatalf("job: %v\n%s", err, out.String())
			}
			for pe := 0; pe < 3; pe++ {
				line := ""
				for _, l := range strings.Split(out.String(), "\n") {
					if strings.Contains(l, "pe="+strconv.Itoa(pe)+" ") {
						line = l
					}
				}
				if !strings.Contains(line, "/"+mpsPipeDir) || !strings.HasSuffix(line, "share=33") {
					t.Fatalf("PE %d saw %q; want the job's pipe directory and a share of 33", pe, line)
				}
				pipe = line[strings.Index(line, "pipe=")+5 : strings.Index(line, " share=")]
				daemon, err := strconv.Atoi(line[strings.Index(line, "daemon=")+7 : strings.Index(line, " pipe=")])
				if err != nil {
					t.Fatalf("PE %d found no daemon: %q", pe, line)
				}
				if !gone(daemon) {
					t.Errorf("MPS daemon %d still running after its job", daemon)
				}
			}
			if _, err := os.Stat(pipe); err == nil {
				t.Errorf("run directory %s left after the job", pipe)
			}
		} else if err == nil {
			t.Fatal("a job whose PE 1 fails returned nil")
		}
	}
}

// TestKilledLauncherLeavesNoDaemon: a launcher killed with SIGKILL leaves
// its daemon running; the next job's start finds it through the stale run
// directory and stops it.
func TestKilledLauncherLeavesNoDaemon(t *testing.T) {
	fakeMPS(t)
	pids := t.TempDir()
	launcher := exec.Command(os.Args[0])
	launcher.Env = append(os.Environ(), envRole+"=launcher", "LAUNCH_TEST_PE_ROLE=sleep", "LAUNCH_TEST_MPS=1", envPidDir+"="+pids)
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	waitForFiles(t, pids, "pe-0", "pe-1")
	runDirs, _ := filepath.Glob(filepath.Join(os.TempDir(), runDirPrefix+strconv.Itoa(launcher.Process.Pid)+"-*"))
	if len(runDirs) != 1 {
		t.Fatalf("run directories of the launcher: %v", runDirs)
	}
	daemon := daemonPid(t, filepath.Join(runDirs[0], mpsPipeDir))
	launcher.Process.Kill()
	launcher.Wait()
	time.Sleep(100 * time.Millisecond)
	if !alive(daemon) {
		t.Fatal("the daemon died with its launcher: nothing to test")
	}
	var out syncbuf.Buffer
	if err := Run(context.Background(), spec("env", 1, &out)); err != nil {
		t.Fatalf("next job: %v\n%s", err, out.String())
	}
	if !gone(daemon) {
		t.Fatalf("the killed launcher's MPS daemon %d is still running after the next start", daemon)
	}
	if _, err := os.Stat(runDirs[0]); err == nil {
		t.Errorf("stale run directory %s survived", runDirs[0])
	}
}

// TestStaleDaemonKeptUntilStopped: a killed launcher's run directory whose
// MPS daemon still runs is kept by a launcher that cannot stop the daemon
// (no nvidia-cuda-mps-control on its PATH: another user's job, a job on the
// CPU backends), so that the next launcher that can still finds the daemon
// through it; that one stops the daemon and removes the directory. (Under
// go test ./..., another package's launcher used to remove the directory
// first and leave the daemon to run: TestKilledLauncherLeavesNoDaemon
// failed now and then.)
func TestStaleDaemonKeptUntilStopped(t *testing.T) {
	fakeMPS(t)
	withControl := os.Getenv("PATH")
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, runDirPrefix+strconv.Itoa(dead.Process.Pid)+"-0123")
	d := mpsDaemonIn(runDir)
	for _, p := range []string{d.pipe, d.logs} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	start := exec.Command("nvidia-cuda-mps-control", "-d")
	start.Env = append(os.Environ(), d.env()...)
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("fake daemon: %v: %s", err, out)
	}
	daemon := daemonPid(t, d.pipe)

	t.Setenv("PATH", t.TempDir()) // no control binary
	if removed, err := removeStale(dir, runDirPrefix, stopStaleMPS); err != nil || len(removed) != 0 {
		t.Fatalf("without a control binary removeStale removed %v (%v), want nothing", removed, err)
	}
	if _, err := os.Stat(d.pipe); err != nil || !alive(daemon) {
		t.Fatalf("without a control binary: pipe directory %v, daemon %d running %v; want both kept", err, daemon, alive(daemon))
	}

	t.Setenv("PATH", withControl)
	if removed, err := removeStale(dir, runDirPrefix, stopStaleMPS); err != nil || len(removed) != 1 || removed[0] != runDir {
		t.Fatalf("with the control binary removeStale removed %v (%v), want %s", removed, err, runDir)
	}
	if !gone(daemon) {
		t.Fatalf("the stale daemon %d still runs after a launcher that can stop it", daemon)
	}
}

// TestMPSMissing: asking for MPS without the binary is an error saying so.
func TestMPSMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var out syncbuf.Buffer
	s := spec("env", 1, &out)
	s.MPS = &MPS{PEsPerGPU: 2}
	if err := Run(context.Background(), s); err == nil || !strings.Contains(err.Error(), "nvidia-cuda-mps-control not found") {
		t.Fatalf("Run with MPS and no binary: %v", err)
	}
}
