package traincmd

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// restartRun is a run over 4 short epochs (100 steps each) with a
// checkpoint every 30 steps, so that a restart resumes inside an epoch.
// (Every start of a PE makes the synthetic data again, about a CPU-second:
// the tests keep starts few.)
var restartRun = []string{"--model", "mlp", "--dataset", "synthetic", "--hidden", "32", "--batch-size", "64",
	"--train-limit", "6400", "--epochs", "4", "--max-steps", "400", "--log-every", "10", "--checkpoint-every", "30", "--no-progress"}

var (
	stepLine = regexp.MustCompile(`^epoch \d+ step (\d+)/`)
	hashLine = regexp.MustCompile(`replicas identical on (?:all \d+|both) PEs \(step 400, parameter hash ([0-9a-f]{16})\)`)
)

// finalHash is the parameter hash of the run's last line.
func finalHash(t *testing.T, j *job) string {
	t.Helper()
	m := hashLine.FindStringSubmatch(j.stdout.String())
	if m == nil {
		t.Fatalf("exit %d, no replica line for step 400 in stdout:\n%s\nstderr:\n%s", j.code, j.stdout.String(), j.stderr.String())
	}
	return m[1]
}

// runKilling runs j and, each time PE 0 logs a step at or past the next of
// targets, SIGKILLs the PE that pick chooses (found by pid among the
// launcher's children), at most once a generation of PEs. It returns the
// kills, "PE p at step s".
func runKilling(t *testing.T, j *job, targets []int, pick func() int) []string {
	t.Helper()
	pr, pw := io.Pipe()
	j.cmd.Stdout = io.MultiWriter(&j.stdout, pw)
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var kills []string
	dead := map[int]bool{} // the pids of the generations killed
	done := make(chan bool)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			m := stepLine.FindStringSubmatch(sc.Text())
			if m == nil || len(kills) == len(targets) {
				continue
			}
			step, _ := strconv.Atoi(m[1])
			if step < targets[len(kills)] {
				continue
			}
			// The lines lag the PEs: a line read after a kill may come from
			// the generation being torn down. Kill only when every PE found
			// is of a new generation, so that each kill costs a restart.
			pids := pePIDs(t, j.cmd.Process.Pid)
			stale := false
			for _, p := range pids {
				stale = stale || dead[p]
			}
			if stale {
				continue
			}
			pe := pick()
			if pid := pids[pe]; pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
				kills = append(kills, fmt.Sprintf("PE %d at step %d", pe, step))
				for _, p := range pids {
					dead[p] = true
				}
			}
		}
	}()
	j.code = exitCode(t, j.cmd.Wait())
	pw.Close()
	<-done
	return kills
}

// restartJob is restartRun on pes PEs with a new checkpoint directory
// (returned) and more.
func restartJob(t *testing.T, pes int, more ...string) (*job, string) {
	dir := t.TempDir()
	args := append([]string{"--pes", strconv.Itoa(pes)}, restartRun...)
	return newJob(t, append(append(args, "--checkpoint-dir", dir), more...)...), dir
}

// TestRestartAfterKill: with --max-restarts, a job of 4 PEs one of which is
// SIGKILLed after the first checkpoint restarts from that checkpoint, says
// so, exits 0 and ends on the parameter hash of the run without the kill.
func TestRestartAfterKill(t *testing.T) {
	ref, _ := restartJob(t, 4)
	want := finalHash(t, ref.run(t))
	j, dir := restartJob(t, 4, "--max-restarts", "2")
	kills := runKilling(t, j, []int{40}, func() int { return 2 })
	t.Logf("killed %v", kills)
	errs := j.stderr.String()
	if j.code != 0 || len(kills) != 1 || finalHash(t, j) != want {
		t.Fatalf("exit %d, kills %v, stdout:\n%s\nstderr:\n%s\nwant exit 0 and hash %s", j.code, kills, j.stdout.String(), errs, want)
	}
	// The kill lands at step 40 of PE 0's progress lines or a little later
	// (the lines lag the PEs), so the restart may come from the checkpoint
	// of step 30 or a later one; which one does not change the result.
	restart := regexp.MustCompile(`train: restart 1 of 2: starting 4 PEs again from ` +
		regexp.QuoteMeta(dir+string(filepath.Separator)) + `ckpt-0*([0-9]+)\.safetensors \(step ([0-9]+)\)\n`)
	m := restart.FindStringSubmatch(errs)
	if !strings.Contains(errs, "train: PE 2 failed: killed by signal 9 (killed); not sent by the launcher: most often the kernel's out-of-memory killer") || m == nil || m[1] != m[2] {
		t.Errorf("stderr does not name the failure and the restart:\n%s", errs)
	} else if step, _ := strconv.Atoi(m[2]); step < 30 || step%30 != 0 {
		t.Errorf("restarted from step %d, want the checkpoint of step 30 or a later one (every 30 steps)", step)
	}
	j.clean(t)
}

// TestRestartsAtRandomSteps: PEs SIGKILLed at three random steps of one run
// (seed in the log) cost three restarts and change no bit of the result.
func TestRestartsAtRandomSteps(t *testing.T) {
	ref, _ := restartJob(t, 2)
	want := finalHash(t, ref.run(t))
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	var targets []int
	for len(targets) < 3 { // distinct steps well before the end (400)
		s := 10 * (2 + rng.IntN(20))
		if !slices.Contains(targets, s) {
			targets = append(targets, s)
		}
	}
	slices.Sort(targets)
	j, _ := restartJob(t, 2, "--max-restarts", "3")
	kills := runKilling(t, j, targets, func() int { return rng.IntN(2) })
	t.Logf("seed %d, targets %v, killed %v", seed, targets, kills)
	if j.code != 0 || len(kills) != 3 || finalHash(t, j) != want {
		t.Fatalf("exit %d, kills %v, stdout:\n%s\nstderr:\n%s\nwant exit 0 and hash %s", j.code, kills, j.stdout.String(), j.stderr.String(), want)
	}
	if n := strings.Count(j.stderr.String(), "train: restart "); n != 3 {
		t.Errorf("%d restarts in stderr, want 3:\n%s", n, j.stderr.String())
	}
	j.clean(t)
}

// TestRestartsRunOut: a PE that fails at the same step every time is
// restarted --max-restarts times, then the job fails as without restarts.
func TestRestartsRunOut(t *testing.T) {
	j := newJob(t, "--pes", "2", "--checkpoint-dir", t.TempDir(), "--max-restarts", "1",
		"--fault-inject", "pe=1,step=5,mode=kill").run(t)
	errs := j.stderr.String()
	if j.code != 137 || strings.Count(errs, "train: PE 1 failed: killed by signal 9 (killed)") != 2 ||
		strings.Count(errs, "train: restart 1 of 1: starting 2 PEs again from the start (no checkpoint yet)") != 1 ||
		strings.Contains(errs, "restart 2") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 137 after one restart", j.code, errs)
	}
	j.clean(t)
}

func TestWithoutFlag(t *testing.T) {
	got := withoutFlag([]string{"--pes", "2", "--init-from", "hf", "--lr", "1e-4", "--init-from=x", "--init-from-not", "y"}, "init-from")
	want := []string{"--pes", "2", "--lr", "1e-4", "--init-from-not", "y"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("withoutFlag: %q, want %q", got, want)
	}
}
